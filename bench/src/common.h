/* Shared helpers for retype's clean-room allocator benchmarks: clock, a small RNG, and the
 * one result line every program prints: "ops=<n> secs=<t>" (run.sh turns it into ops/s). */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* xorshift64*: fast, deterministic per seed. */
static inline uint64_t rnd(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
  *s = x;
  return x * 2685821657736338717ULL;
}

static inline void report(double ops, double secs) {
  printf("ops=%.0f secs=%.3f mops=%.2f\n", ops, secs, ops / secs / 1e6);
}

static inline void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
  return p;
}
#endif
