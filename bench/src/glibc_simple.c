/* glibc-simple-like: fixed-size blocks in batches of 25/100/400/1600; each batch is freed
 * half in FIFO then half in LIFO order; every byte is touched.
 * With a third argument `full`, the schedule of glibc's malloc benchmark as seed 004 runs it
 * (glibc's bench-malloc-thread, from its description): for SIZE, 2×SIZE and 4×SIZE in turn, a
 * warm-up pass, then the batches in the main thread, again in a second thread, and again in
 * the main thread once a thread has existed.
 * usage: glibc_simple ITERATIONS SIZE [full] */
#include "common.h"
static long iters;
static void *p[1600];

/* One pass of every batch size; returns the blocks allocated. */
static double batches(int size) {
  const int batch[4] = {25, 100, 400, 1600};
  double ops = 0;
  for (int b = 0; b < 4; b++) {
    int n = batch[b];
    long rounds = iters * 25 / n;
    for (long r = 0; r < rounds; r++) {
      for (int i = 0; i < n; i++) { p[i] = xmalloc(size); memset(p[i], i, size); }
      for (int i = 0; i < n / 2; i++) free(p[i]);
      for (int i = n - 1; i >= n / 2; i--) free(p[i]);
      ops += n;
    }
  }
  return ops;
}

static int thread_size;
static double thread_ops;
static void *in_thread(void *arg) { (void)arg; thread_ops = batches(thread_size); return 0; }

int main(int argc, char **argv) {
  iters = argc > 1 ? atol(argv[1]) : 200000;
  int size = argc > 2 ? atoi(argv[2]) : 16;
  int full = argc > 3 && !strcmp(argv[3], "full");
  if (iters < 1 || size < 1 || (argc > 3 && !full)) {
    fprintf(stderr, "usage: glibc_simple ITERATIONS SIZE [full]\n");
    return 2;
  }
  double ops = 0, t0 = now_s();
  if (!full) {
    ops = batches(size);
  } else {
    for (int s = size; s <= 4 * size; s *= 2) {
      ops += batches(s); /* warm-up */
      ops += batches(s);
      pthread_t t;
      thread_size = s;
      pthread_create(&t, 0, in_thread, 0);
      pthread_join(t, 0);
      ops += thread_ops;
      ops += batches(s);
    }
  }
  report(ops, now_s() - t0);
  return 0;
}
