/* large: each thread keeps a pool of SLOTS large blocks and replaces a random slot with a new
 * block of random size 5..25 MB, again and again (the pattern of mimalloc-bench's
 * malloc-large, written from that description). The new block is allocated before the old
 * one is freed. TOUCH 0 writes a few bytes of each new block (first, middle, last); TOUCH 1
 * writes one byte in every 4 KiB page, as a program that fills its buffers does.
 * usage: large THREADS SLOTS ITERATIONS_PER_THREAD TOUCH */
#include "common.h"
#define MB (1000 * 1000)
static int slots; static long iters; static int touch;
static void *run(void *arg) {
  uint64_t s = 0x9E3779B97F4A7C15ULL * ((uintptr_t)arg + 1);
  char **slot = calloc((size_t)slots, sizeof *slot);
  for (long i = 0; i < iters; i++) {
    uint64_t r = rnd(&s);
    unsigned k = (unsigned)(r % (uint64_t)slots);
    size_t n = 5 * MB + (size_t)((r >> 32) % (20 * MB + 1));
    char *p = xmalloc(n);
    if (touch) {
      for (size_t j = 0; j < n; j += 4096) p[j] = (char)j;
    } else {
      p[0] = 1; p[n / 2] = 2; p[n - 1] = 3;
    }
    free(slot[k]);
    slot[k] = p;
  }
  for (int k = 0; k < slots; k++) free(slot[k]);
  free(slot);
  return 0;
}
int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  slots = argc > 2 ? atoi(argv[2]) : 20;
  iters = argc > 3 ? atol(argv[3]) : 5000;
  touch = argc > 4 ? atoi(argv[4]) : 0;
  if (threads < 1 || threads > 64 || slots < 1) { fprintf(stderr, "usage: large THREADS SLOTS ITERATIONS TOUCH\n"); return 2; }
  pthread_t t[64];
  double t0 = now_s();
  for (long i = 0; i < threads; i++) pthread_create(&t[i], 0, run, (void *)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
  report((double)iters * threads, now_s() - t0);
  return 0;
}
