/* One thread allocates batches of blocks of mixed sizes (8 to 2048 bytes) and hands them to
 * another, which frees them: every free is a remote one, racing with the owner's mallocs in
 * the same pages (hardened mode checks the tag of a block's neighbour as it is freed). Prints
 * OK. usage: handoff [BATCHES] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define BATCH 4096
#define QLEN 8
static void **queue[QLEN];
static int head, tail, count, done;
static long batches;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;

static void *produce(void *arg) {
  (void)arg;
  unsigned s = 77;
  for (long b = 0; b < batches; b++) {
    void **batch = malloc(BATCH * sizeof *batch);
    for (int i = 0; i < BATCH; i++) {
      s = s * 1103515245u + 12345u;
      batch[i] = malloc(8 + (s >> 8) % 2041);
      *(char *)batch[i] = 1;
    }
    pthread_mutex_lock(&mu);
    while (count == QLEN) pthread_cond_wait(&changed, &mu);
    queue[tail] = batch, tail = (tail + 1) % QLEN, count++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&mu);
  }
  pthread_mutex_lock(&mu);
  done = 1;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&mu);
  return 0;
}

static void *consume(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&mu);
    while (count == 0 && !done) pthread_cond_wait(&changed, &mu);
    if (count == 0) { pthread_mutex_unlock(&mu); return 0; }
    void **batch = queue[head];
    head = (head + 1) % QLEN, count--;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < BATCH; i++) free(batch[i]);
    free(batch);
  }
}

int main(int argc, char **argv) {
  batches = argc > 1 ? atol(argv[1]) : 1000;
  pthread_t p, c;
  pthread_create(&p, 0, produce, 0);
  pthread_create(&c, 0, consume, 0);
  pthread_join(p, 0);
  pthread_join(c, 0);
  printf("OK\n");
  return 0;
}
