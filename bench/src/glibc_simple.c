/* glibc-simple-like: fixed-size blocks in batches of 25/100/400/1600; each batch is freed
 * half in FIFO then half in LIFO order; every byte is touched.
 * usage: glibc_simple ITERATIONS SIZE */
#include "common.h"
int main(int argc, char **argv) {
  long iters = argc > 1 ? atol(argv[1]) : 200000;
  int size = argc > 2 ? atoi(argv[2]) : 16;
  static void *p[1600];
  const int batches[4] = {25, 100, 400, 1600};
  double ops = 0, t0 = now_s();
  for (int b = 0; b < 4; b++) {
    int n = batches[b];
    long rounds = iters * 25 / n;
    for (long r = 0; r < rounds; r++) {
      for (int i = 0; i < n; i++) { p[i] = xmalloc(size); memset(p[i], i, size); }
      for (int i = 0; i < n / 2; i++) free(p[i]);
      for (int i = n - 1; i >= n / 2; i--) free(p[i]);
      ops += n;
    }
  }
  report(ops, now_s() - t0);
  return 0;
}
