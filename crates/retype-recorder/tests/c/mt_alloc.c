/* A multi-threaded workload that calls every function of the malloc family a
 * known number of times. Usage: mt_alloc THREADS ITERATIONS
 * Prints "calls N": the malloc-family calls made by the worker threads
 * (the main thread makes none besides pthread's own). */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 64

static long iterations;

static void *work(void *arg) {
    unsigned seed = (unsigned)(long)arg;
    void *keep[SLOTS] = {0};
    long calls = 0;
    for (long i = 0; i < iterations; i++) {
        seed = seed * 1103515245u + 12345u;
        size_t size = 1 + (seed >> 8) % 4096;
        int s = (int)(i % SLOTS);
        switch (i % 8) {
        case 0: free(keep[s]); keep[s] = malloc(size); calls += 2; break;
        case 1: keep[s] = realloc(keep[s], size); calls += 1; break;
        case 2: free(keep[s]); keep[s] = calloc(1 + size % 8, size / 8 + 1); calls += 2; break;
        case 3: free(keep[s]); if (posix_memalign(&keep[s], 64, size)) keep[s] = NULL; calls += 2; break;
        case 4: free(keep[s]); keep[s] = aligned_alloc(128, (size + 127) & ~(size_t)127); calls += 2; break;
        case 5: free(keep[s]); keep[s] = memalign(32, size); calls += 2; break;
        case 6: free(keep[s]); keep[s] = valloc(size); calls += 2; break;
        default: { void *p = malloc(size); ((volatile char *)p)[0] = 1; free(p); calls += 2; }
        }
    }
    for (int s = 0; s < SLOTS; s++) { free(keep[s]); calls += 1; }
    return (void *)calls;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: mt_alloc THREADS ITERATIONS\n"); return 2; }
    int threads = atoi(argv[1]);
    iterations = atol(argv[2]);
    pthread_t t[64];
    if (threads < 1 || threads > 64) return 2;
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, work, (void *)(long)(i + 1));
    long calls = 0;
    for (int i = 0; i < threads; i++) { void *c; pthread_join(t[i], &c); calls += (long)c; }
    printf("calls %ld\n", calls);
    return 0;
}
