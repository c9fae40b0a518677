/* alloc-test-like: per thread, a working set of 65536 slots; each op replaces a random slot
 * with a block whose size follows a Pareto-like mix (most below 64 B, a tail to ~1 KiB).
 * usage: alloc_test THREADS MILLION_OPS_PER_THREAD */
#include "common.h"
static long ops;
static void *run(void *arg) {
  uint64_t s = 31337 + (uintptr_t)arg;
  enum { N = 65536 };
  void **slot = calloc(N, sizeof(void *));
  for (long i = 0; i < ops; i++) {
    uint64_t r = rnd(&s);
    unsigned k = r % N;
    free(slot[k]);
    /* Pareto: size = 8 / u^(1/1.2), capped at 1024 */
    double u = ((r >> 11) % 1000000 + 1) / 1000000.0;
    double x = 8.0;
    for (double v = u; v < 0.5 && x < 1024; v *= 2) x *= 1.8;
    slot[k] = xmalloc((size_t)x); *(char *)slot[k] = 0;
  }
  for (int k = 0; k < N; k++) free(slot[k]);
  free(slot);
  return 0;
}
int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  ops = (long)((argc > 2 ? atof(argv[2]) : 10) * 1e6);
  pthread_t t[64];
  double t0 = now_s();
  for (long i = 0; i < threads; i++) pthread_create(&t[i], 0, run, (void *)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
  report((double)ops * threads, now_s() - t0);
  return 0;
}
