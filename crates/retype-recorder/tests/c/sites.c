/* Three allocation sites with known calls and bytes, and a known leak, for
 * the tests of call stacks, `retype trace sites` and `retype trace leaks`.
 * It makes no other malloc-family call (no stdio).
 *
 *   names:  100 malloc(32), all freed              3,200 bytes
 *   table:   10 calloc(8, 128), one kept (global) 10,240 bytes, 1,024 still reachable
 *   leaky:    5 malloc(200), pointers dropped      1,000 bytes, definitely lost
 *
 * The peak (13,440 live bytes) is reached at table's last calloc, while every
 * name is live: names 3,200 + table 10,240. At exit 2,024 bytes in 6 blocks
 * are live: table's kept block and leaky's five. */
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static void *kept;
static void *names_live[100];

NOINLINE static void names(void) {
    for (int i = 0; i < 100; i++)
        names_live[i] = malloc(32);
}

NOINLINE static void free_names(void) {
    for (int i = 0; i < 100; i++)
        free(names_live[i]);
}

NOINLINE static void table(void) {
    void *rows[10];
    for (int i = 0; i < 10; i++)
        rows[i] = calloc(8, 128);
    kept = rows[3];
    for (int i = 0; i < 10; i++)
        if (i != 3)
            free(rows[i]);
}

NOINLINE static void leaky(void) {
    for (int i = 0; i < 5; i++) {
        volatile char *p = malloc(200);
        p[0] = 1;
    }
}

int main(void) {
    names();
    table();
    free_names();
    leaky();
    return kept == NULL;
}
