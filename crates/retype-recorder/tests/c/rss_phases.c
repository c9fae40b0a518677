/* A program whose memory grows, shrinks and grows again, in heap blocks and
 * in mappings of its own, every page touched, 50 ms between phases, for the
 * RSS and mapping tests of `retype trace timeline`:
 *
 *   grow:    malloc 48 MiB, mmap 32 MiB                   80 MiB touched
 *   shrink:  free, munmap; sbrk +1 MiB (touched), brk back  nothing left
 *   regrow:  malloc 48 MiB, mmap 16 MiB, mremap to 32 MiB  80 MiB touched
 *
 * It prints each mapping call it made, one a line, for the test to find in
 * the trace: `mmap ADDR LEN`, `munmap ADDR LEN`, `mremap OLD OLDLEN NEW LEN`,
 * `brk OLD NEW` (the break before and after), addresses in hex. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024 * 1024)

static char lines[8][128];
static int n;

static void pause_50ms(void) {
    struct timespec t = {0, 50 * 1000 * 1000};
    nanosleep(&t, NULL);
}

static char *map(size_t len) {
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        exit(2);
    snprintf(lines[n++], sizeof lines[0], "mmap %lx %zu", (unsigned long)m, len);
    return m;
}

static void move_break(intptr_t by) {
    char *old = sbrk(0);
    if (by > 0) {
        if (sbrk(by) != old)
            exit(3);
        memset(old, 1, by);
    } else if (brk(old + by) != 0) {
        exit(4);
    }
    snprintf(lines[n++], sizeof lines[0], "brk %lx %lx", (unsigned long)old,
             (unsigned long)(old + by));
}

int main(void) {
    char *p = malloc(48 * MIB);
    memset(p, 1, 48 * MIB);
    char *m = map(32 * MIB);
    memset(m, 1, 32 * MIB);
    pause_50ms();

    free(p);
    if (munmap(m, 32 * MIB) != 0)
        return 5;
    snprintf(lines[n++], sizeof lines[0], "munmap %lx %d", (unsigned long)m, 32 * MIB);
    move_break(MIB);
    move_break(-MIB);
    pause_50ms();

    p = malloc(48 * MIB);
    memset(p, 1, 48 * MIB);
    m = map(16 * MIB);
    char *r = mremap(m, 16 * MIB, 32 * MIB, MREMAP_MAYMOVE);
    if (r == MAP_FAILED)
        return 6;
    snprintf(lines[n++], sizeof lines[0], "mremap %lx %d %lx %d", (unsigned long)m, 16 * MIB,
             (unsigned long)r, 32 * MIB);
    memset(r, 1, 32 * MIB);
    pause_50ms();

    for (int i = 0; i < n; i++)
        puts(lines[i]);
    return p[0] != 1 || r[0] != 1;
}
