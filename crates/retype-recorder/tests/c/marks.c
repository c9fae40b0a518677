/* The markers API (include/retype.h) as a program uses it: runs with and
 * without the recorder. Three phases, then the figures of the last:
 *
 *   load:    10 malloc(1000), kept
 *   solve:   5 malloc(100000), freed; 1 malloc(7000), kept (a leak of the phase)
 *   report:  3 malloc(300), freed
 *
 * Prints `recorder: no` without the recorder; under it, solve's figures read
 * in the process at its end, its sites ranked by bytes allocated
 * (`solve: allocated A live L peak P sites S top T`). */
#include <stdio.h>
#include <stdlib.h>

#include "../../include/retype.h"

#define NOINLINE __attribute__((noinline))

/* Not static: the compiler may not drop the blocks as never read. */
void *kept[16];

NOINLINE static void load(void) {
    for (int i = 0; i < 10; i++)
        kept[i] = malloc(1000);
}

NOINLINE static void solve(void) {
    for (int i = 0; i < 5; i++) {
        void *p = malloc(100000);
        ((volatile char *)p)[0] = 1;
        free(p);
    }
    kept[10] = malloc(7000);
}

/* Through a volatile pointer: the compiler may not drop a block freed unread. */
void *volatile sink;

NOINLINE static void report(void) {
    for (int i = 0; i < 3; i++) {
        sink = malloc(300);
        free(sink);
    }
}

int main(void) {
    /* Unbuffered: printf allocates no buffer inside a phase. */
    setvbuf(stdout, NULL, _IONBF, 0);
    RETYPE_MARK("load");
    load();
    RETYPE_MARK("solve");
    solve();
    if (retype_phase_stats) {
        struct retype_phase_stats s;
        if (retype_phase_stats(&s, /* by_live */ 0) == 0)
            printf("solve: allocated %llu live %llu peak %llu sites %u top %llu\n",
                   (unsigned long long)s.allocated, (unsigned long long)s.live,
                   (unsigned long long)s.peak, s.sites_len,
                   (unsigned long long)s.sites[0].allocated);
    } else {
        printf("recorder: no\n");
    }
    RETYPE_MARK("report");
    report();
    RETYPE_MARK(NULL);
    return 0;
}
