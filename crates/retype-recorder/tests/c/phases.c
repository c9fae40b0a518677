/* A program whose heap grows, shrinks and grows again, in phases 30 ms
 * apart, for the tests of `retype trace timeline`, `--from/--to`, the massif
 * export, temporaries and the `trace diff` gate. No other malloc-family call.
 *
 *   grow:    100 malloc(1000), 90 freed by shrink    100,000 bytes at its height
 *   regrow:   50 malloc(2000), kept                  100,000 bytes (200,000 with
 *            an argument: the planted regression)
 *   scratch:  20 malloc(64), each freed at once      20 temporary allocations
 *            (and grow's last block, which shrink frees first: 21 in all)
 *
 * Live bytes: 100,000 after grow, 10,000 after shrink, 110,000 after regrow
 * (110,064 at the peak, with one of scratch's blocks),
 * and at exit (10 of grow's blocks and regrow's 50 are never freed). */
#include <stdlib.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

static void *grown[100];
static void *regrown[100];

static void pause_30ms(void) {
    struct timespec t = {0, 30 * 1000 * 1000};
    nanosleep(&t, NULL);
}

NOINLINE static void grow(void) {
    for (int i = 0; i < 100; i++)
        grown[i] = malloc(1000);
}

NOINLINE static void shrink(void) {
    for (int i = 10; i < 100; i++)
        free(grown[i]);
}

NOINLINE static void regrow(int blocks) {
    for (int i = 0; i < blocks; i++)
        regrown[i] = malloc(2000);
}

NOINLINE static void scratch(void) {
    for (int i = 0; i < 20; i++) {
        volatile char *p = malloc(64);
        p[0] = 1;
        free((void *)p);
    }
}

int main(int argc, char **argv) {
    (void)argv;
    grow();
    pause_30ms();
    shrink();
    pause_30ms();
    regrow(argc > 1 ? 100 : 50);
    pause_30ms();
    scratch();
    return grown[0] == NULL || regrown[0] == NULL;
}
