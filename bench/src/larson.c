/* larson-like server "bleeding": each thread replaces random slots (8..1000 B) of an array
 * it inherited, then hands the array to a newly created thread, so most blocks are freed
 * by a thread other than the one that allocated them.
 * usage: larson THREADS ROUNDS SLOTS OPS_PER_ROUND */
#include "common.h"
static int rounds, nslots; static long ops_per_round;
/* One cache line each: the threads of the two chains would otherwise write the same line on
 * every operation (the seed), and the run would time that false sharing, not the allocator. */
struct arg { void **slots; uint64_t seed; int round; } __attribute__((aligned(64)));
static void *run(void *p) {
  struct arg *a = p;
  uint64_t seed = a->seed;
  for (long i = 0; i < ops_per_round; i++) {
    uint64_t r = rnd(&seed);
    int k = r % nslots;
    free(a->slots[k]);
    a->slots[k] = xmalloc(8 + (r >> 32) % 993);
    memset(a->slots[k], 1, 8);
  }
  a->seed = seed;
  if (++a->round < rounds) {
    pthread_t t;
    pthread_create(&t, 0, run, a);
    pthread_join(t, 0);
  }
  return 0;
}
int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  rounds = argc > 2 ? atoi(argv[2]) : 30;
  nslots = argc > 3 ? atoi(argv[3]) : 5000;
  ops_per_round = argc > 4 ? atol(argv[4]) : 200000;
  pthread_t t[64]; struct arg a[64];
  for (int i = 0; i < threads; i++) {
    a[i].slots = calloc(nslots, sizeof(void *)); a[i].seed = 4141 + i; a[i].round = 0;
    for (int k = 0; k < nslots; k++) a[i].slots[k] = xmalloc(8 + k % 993);
  }
  double t0 = now_s();
  for (int i = 0; i < threads; i++) pthread_create(&t[i], 0, run, &a[i]);
  for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
  double dt = now_s() - t0;
  for (int i = 0; i < threads; i++) { for (int k = 0; k < nslots; k++) free(a[i].slots[k]); free(a[i].slots); }
  report((double)threads * rounds * ops_per_round, dt);
  return 0;
}
