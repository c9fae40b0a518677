/* pool: a pooled random size mix with cross-thread frees. All threads share one pool of SLOTS
 * slots; each operation swaps a fresh block into a random slot (atomic exchange) and frees the
 * block it took out, which any thread may have allocated, so at T threads about (T-1)/T of the
 * frees are remote, in no order the allocator can predict. Sizes: 70 % of 16..128 B, 25 % of
 * 129..2048 B, 5 % of 2 KiB..32 KiB, as a cache of mixed objects shared by worker threads holds.
 * Written from that description for retype's scaling runs.
 * usage: pool THREADS SLOTS MILLION_OPS_PER_THREAD */
#include "common.h"
static void *_Atomic *slot;
static long nslots, ops;
static size_t mix(uint64_t r) {
  unsigned k = r % 100; uint64_t v = r >> 16;
  if (k < 70) return 16 + v % 113;
  if (k < 95) return 129 + v % 1920;
  return 2049 + v % 30720;
}
static void *run(void *arg) {
  uint64_t s = 0x2545F4914F6CDD1DULL * ((uintptr_t)arg + 1);
  for (long i = 0; i < ops; i++) {
    uint64_t r = rnd(&s);
    size_t n = mix(rnd(&s));
    char *p = xmalloc(n);
    p[0] = p[n - 1] = (char)i;
    free(__atomic_exchange_n(&slot[r % nslots], p, __ATOMIC_ACQ_REL));
  }
  return 0;
}
int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  nslots = argc > 2 ? atol(argv[2]) : 65536;
  ops = (long)((argc > 3 ? atof(argv[3]) : 5) * 1e6);
  if (threads < 1 || threads > 64 || nslots < 1) { fprintf(stderr, "usage: pool THREADS(1-64) SLOTS MILLION_OPS_PER_THREAD\n"); return 2; }
  slot = calloc(nslots, sizeof *slot);
  pthread_t t[64];
  double t0 = now_s();
  for (long i = 0; i < threads; i++) pthread_create(&t[i], 0, run, (void *)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
  double dt = now_s() - t0;
  for (long k = 0; k < nslots; k++) free(slot[k]);
  free(slot);
  report((double)ops * threads, dt);
  return 0;
}
