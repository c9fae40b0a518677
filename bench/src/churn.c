/* churn: each thread replaces random slots of a 4096-slot array with new blocks of random
 * size 8..MAX; the fast-path benchmark (malloc+free pairs per second).
 * usage: churn THREADS MAXSIZE MILLION_PAIRS_PER_THREAD */
#include "common.h"
static int max_size; static long pairs;
static void *run(void *arg) {
  uint64_t s = 0x9E3779B97F4A7C15ULL * ((uintptr_t)arg + 1);
  void *slot[4096] = {0};
  for (long i = 0; i < pairs; i++) {
    uint64_t r = rnd(&s);
    unsigned k = r & 4095;
    size_t n = 8 + (r >> 32) % (uint64_t)(max_size - 7);
    free(slot[k]);
    slot[k] = xmalloc(n);
    *(char *)slot[k] = (char)i;
  }
  for (int k = 0; k < 4096; k++) free(slot[k]);
  return 0;
}
int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  max_size = argc > 2 ? atoi(argv[2]) : 1024;
  pairs = (long)((argc > 3 ? atof(argv[3]) : 50) * 1e6);
  pthread_t t[64];
  double t0 = now_s();
  for (long i = 0; i < threads; i++) pthread_create(&t[i], 0, run, (void *)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
  report((double)pairs * threads, now_s() - t0);
  return 0;
}
