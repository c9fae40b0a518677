/* mstress-like: phases of THREADS threads that are created and destroyed each iteration;
 * power-of-two sizes, 1 % large (up to 1 MiB) and 0.1 % huge (up to 8 MiB) blocks,
 * reallocs, and a shared 1000-slot transfer array through which objects survive phases
 * and get freed by other threads.
 * usage: mstress THREADS SCALE ITERATIONS */
#include "common.h"
#define TRANSFER 1000
static void *_Atomic transfer[TRANSFER];
static long steps;
static size_t pick(uint64_t r) {
  unsigned k = r % 1000;
  if (k == 0) return (size_t)1 << (20 + (r >> 20) % 4);  /* huge: 1..8 MiB */
  if (k < 11) return (size_t)1 << (14 + (r >> 20) % 6);  /* large: 16 KiB..512 KiB */
  return (size_t)1 << (3 + (r >> 20) % 8);               /* small: 8..1024 */
}
static void *run(void *arg) {
  uint64_t s = 99 + (uintptr_t)arg;
  void *local[500] = {0}; size_t lsize[500] = {0};
  for (long i = 0; i < steps; i++) {
    uint64_t r = rnd(&s);
    int k = r % 500;
    if ((r >> 40) % 8 == 0 && local[k]) {
      size_t n = pick(rnd(&s));
      void *q = realloc(local[k], n);
      if (!q) exit(1);
      local[k] = q; lsize[k] = n; memset(q, 2, n < 256 ? n : 256);
    } else {
      free(local[k]);
      lsize[k] = pick(rnd(&s)); local[k] = xmalloc(lsize[k]); memset(local[k], 1, lsize[k] < 256 ? lsize[k] : 256);
    }
    if ((r >> 50) % 16 == 0) { /* swap with the transfer array */
      void *old = __atomic_exchange_n(&transfer[(r >> 30) % TRANSFER], local[k], __ATOMIC_ACQ_REL);
      local[k] = old;
    }
  }
  for (int k = 0; k < 500; k++) free(local[k]);
  return 0;
}
int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  int scale = argc > 2 ? atoi(argv[2]) : 50;
  int iterations = argc > 3 ? atoi(argv[3]) : 25;
  steps = 2000L * scale;
  pthread_t t[64];
  double t0 = now_s();
  for (int it = 0; it < iterations; it++) {
    for (long i = 0; i < threads; i++) pthread_create(&t[i], 0, run, (void *)(i + it * 64));
    for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
  }
  for (int k = 0; k < TRANSFER; k++) free(transfer[k]);
  report((double)iterations * threads * steps, now_s() - t0);
  return 0;
}
