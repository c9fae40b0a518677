/* xmalloc-like: producer threads allocate batches of 4096 blocks and pass them through a
 * small queue to consumer threads, which free them (every free is a remote free).
 * usage: xmalloc PAIRS SIZE(-1 = mixed 8..2048) BATCHES_PER_PRODUCER */
#include "common.h"
#define BATCH 4096
#define QLEN 16
static void **queue[QLEN]; static int qhead, qtail, qcount, producers_left;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER, not_empty = PTHREAD_COND_INITIALIZER;
static int size; static long batches;
static void *produce(void *arg) {
  uint64_t s = 77 + (uintptr_t)arg;
  for (long b = 0; b < batches; b++) {
    void **batch = xmalloc(BATCH * sizeof(void *));
    for (int i = 0; i < BATCH; i++) {
      size_t n = size > 0 ? (size_t)size : 8 + rnd(&s) % 2041;
      batch[i] = xmalloc(n); *(char *)batch[i] = 1;
    }
    pthread_mutex_lock(&mu);
    while (qcount == QLEN) pthread_cond_wait(&not_full, &mu);
    queue[qtail] = batch; qtail = (qtail + 1) % QLEN; qcount++;
    pthread_cond_signal(&not_empty);
    pthread_mutex_unlock(&mu);
  }
  pthread_mutex_lock(&mu); producers_left--; pthread_cond_broadcast(&not_empty); pthread_mutex_unlock(&mu);
  return 0;
}
static void *consume(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&mu);
    while (qcount == 0 && producers_left > 0) pthread_cond_wait(&not_empty, &mu);
    if (qcount == 0) { pthread_mutex_unlock(&mu); return 0; }
    void **batch = queue[qhead]; qhead = (qhead + 1) % QLEN; qcount--;
    pthread_cond_signal(&not_full);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < BATCH; i++) free(batch[i]);
    free(batch);
  }
}
int main(int argc, char **argv) {
  int pairs = argc > 1 ? atoi(argv[1]) : 1;
  size = argc > 2 ? atoi(argv[2]) : 64;
  batches = argc > 3 ? atol(argv[3]) : 4000;
  producers_left = pairs;
  pthread_t t[64];
  double t0 = now_s();
  for (long i = 0; i < pairs; i++) { pthread_create(&t[2 * i], 0, produce, (void *)i); pthread_create(&t[2 * i + 1], 0, consume, 0); }
  for (int i = 0; i < 2 * pairs; i++) pthread_join(t[i], 0);
  report((double)pairs * batches * BATCH, now_s() - t0);
  return 0;
}
