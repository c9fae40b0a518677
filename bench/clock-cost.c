/* What one clock read costs: clock_gettime(CLOCK_MONOTONIC) and rdtsc, each
 * averaged over 10^7 reads (docs/recorder.md). cc -O2 -o clock-cost bench/clock-cost.c */
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

#define N 10000000

static double ns_since(struct timespec a) {
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / N;
}

int main(void) {
    struct timespec a, ts;
    long sink = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < N; i++) { clock_gettime(CLOCK_MONOTONIC, &ts); sink += ts.tv_nsec; }
    printf("clock_gettime(CLOCK_MONOTONIC): %.1f ns\n", ns_since(a));
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < N; i++) sink += (long)__rdtsc();
    printf("rdtsc: %.1f ns\n", ns_since(a));
    return (int)(sink & 1) * 0;
}
