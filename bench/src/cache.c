/* cache-scratch / cache-thrash: false sharing induced by the allocator.
 * scratch: the main thread allocates one small object per thread and hands it over; each
 *   thread frees it, allocates its own, and writes it REPS times (passive false sharing).
 * thrash: each thread allocates its own small objects and writes them (active).
 * usage: cache scratch|thrash THREADS ITERATIONS OBJSIZE REPS */
#include "common.h"
static int scratch, iterations, objsize; static long reps;
static void *run(void *arg) {
  char *given = arg;
  for (int it = 0; it < iterations; it++) {
    if (given) { free(given); given = 0; }
    volatile char *o = xmalloc(objsize);
    for (long r = 0; r < reps; r++) for (int b = 0; b < objsize; b++) o[b]++;
    free((void *)o);
  }
  return 0;
}
int main(int argc, char **argv) {
  scratch = argc > 1 && strcmp(argv[1], "scratch") == 0;
  int threads = argc > 2 ? atoi(argv[2]) : 2;
  iterations = argc > 3 ? atoi(argv[3]) : 1000;
  objsize = argc > 4 ? atoi(argv[4]) : 8;
  reps = argc > 5 ? atol(argv[5]) : 20000;
  pthread_t t[64]; void *given[64];
  for (int i = 0; i < threads; i++) given[i] = scratch ? xmalloc(objsize) : 0;
  double t0 = now_s();
  for (int i = 0; i < threads; i++) pthread_create(&t[i], 0, run, given[i]);
  for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
  report((double)threads * iterations * reps * objsize, now_s() - t0);
  return 0;
}
