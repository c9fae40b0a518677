/* glibc-thread-like: each thread replaces random slots of a 1024-slot working set with
 * blocks of 4..32768 bytes drawn from an inverse-square distribution (small sizes common).
 * usage: glibc_thread THREADS MILLION_OPS_PER_THREAD */
#include "common.h"
static long ops;
static size_t inv_square(uint64_t r) {
  /* P(size) ~ 1/size^2 on [4, 32768]: invert the CDF of 1/x on a uniform draw. */
  double u = (double)(r >> 11) / 9007199254740992.0;
  double lo = 1.0 / 4, hi = 1.0 / 32768;
  return (size_t)(1.0 / (lo - u * (lo - hi)));
}
static void *run(void *arg) {
  uint64_t s = 12345 + (uintptr_t)arg;
  void *slot[1024] = {0};
  for (long i = 0; i < ops; i++) {
    uint64_t r = rnd(&s);
    int k = r & 1023;
    free(slot[k]);
    size_t n = inv_square(rnd(&s));
    slot[k] = xmalloc(n); memset(slot[k], 0, n < 64 ? n : 64);
  }
  for (int k = 0; k < 1024; k++) free(slot[k]);
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
