/* tlm_slow: which calls of seed 003's steady rounds are slow. The workload of tlm.c (THREADS
 * workers; growing rounds k = 1..ROUNDS of k*BLOCKS blocks of SIZE bytes, then STEADY rounds of
 * ROUNDS*BLOCKS, each block touched once per 4 KiB page and freed in allocation order), timing
 * every malloc and free of the steady rounds with the TSC; prints each call over 1 us as
 * "wWORKER kROUND iINDEX malloc|free NS ns", a malloc with where its block lies ("seg S slice
 * L first K": its 2 MiB segment, 64 KiB slice in it, and the first round in which this worker
 * got a block of that segment), then a count. For finding what makes p99.9 and p99.99
 * (docs/reproduction-003.md), not a benchmark: nothing else is measured.
 * usage: tlm_slow [THREADS [SIZE [ROUNDS [STEADY [BLOCKS]]]]]   (defaults 2 4096 8 32 256) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

#define MAX_SLOW 100000
struct slow { long round, index; int is_free; uint64_t ticks; uintptr_t p; };
/* first[h]: the first round in which the worker got a block of the segment hashed to h */
#define SEGS 4096
struct worker { pthread_t id; long n; struct slow *slow; int first[SEGS]; };

static long size = 4096, rounds = 8, steady = 32, blocks = 256;
static double ticks_per_ns;
static pthread_barrier_t start;

static void note(struct worker *w, long k, long i, int is_free, uint64_t d, void *p) {
  if (k > rounds && d > ticks_per_ns * 1000 && w->n < MAX_SLOW)
    w->slow[w->n++] = (struct slow){k, i, is_free, d, (uintptr_t)p};
}

static void *run(void *arg) {
  struct worker *w = arg;
  char **b = malloc(sizeof(char *) * (size_t)(rounds * blocks));
  pthread_barrier_wait(&start);
  for (long k = 1; k <= rounds + steady; k++) {
    long n = (k <= rounds ? k : rounds) * blocks;
    for (long i = 0; i < n; i++) {
      uint64_t t = __rdtsc();
      char *p = malloc((size_t)size);
      note(w, k, i, 0, __rdtsc() - t, p);
      if (!p) { fprintf(stderr, "tlm_slow: out of memory\n"); exit(1); }
      int *first = &w->first[((uintptr_t)p >> 21) % SEGS];
      if (!*first) *first = (int)k;
      for (long off = 0; off < size; off += 4096) p[off] = 1;
      b[i] = p;
    }
    for (long i = 0; i < n; i++) {
      uint64_t t = __rdtsc();
      free(b[i]);
      note(w, k, i, 1, __rdtsc() - t, 0);
    }
  }
  return 0;
}

static double ns_since(struct timespec a) {
  struct timespec b;
  clock_gettime(CLOCK_MONOTONIC, &b);
  return (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  if (argc > 2) size = atol(argv[2]);
  if (argc > 3) rounds = atol(argv[3]);
  if (argc > 4) steady = atol(argv[4]);
  if (argc > 5) blocks = atol(argv[5]);
  if (threads < 1 || threads > 64) { fprintf(stderr, "tlm_slow: 1 to 64 threads\n"); return 2; }
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uint64_t c0 = __rdtsc();
  while (ns_since(t0) < 2e7) {}
  ticks_per_ns = (double)(__rdtsc() - c0) / ns_since(t0);
  static struct worker w[64];
  pthread_barrier_init(&start, 0, (unsigned)threads);
  for (int i = 0; i < threads; i++) {
    w[i].slow = malloc(sizeof(struct slow) * MAX_SLOW);
    pthread_create(&w[i].id, 0, run, &w[i]);
  }
  long total = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(w[i].id, 0);
    total += w[i].n;
    for (long j = 0; j < w[i].n; j++) {
      struct slow s = w[i].slow[j];
      printf("w%d k%ld i%ld %s %.0f ns", i, s.round, s.index, s.is_free ? "free" : "malloc",
             (double)s.ticks / ticks_per_ns);
      if (s.is_free) printf("\n");
      else printf(" seg %lx slice %lu first %d\n", (unsigned long)(s.p >> 21),
                  (unsigned long)((s.p >> 16) & 31), w[i].first[(s.p >> 21) % SEGS]);
    }
  }
  printf("slow (over 1 us) steady calls: %ld of %ld\n", total, 2 * threads * steady * rounds * blocks);
  return 0;
}
