/* transient: threads that come and go. THREADS workers run at any moment; each lives for LIFE
 * operations on a private set of 256 slots (blocks of 8..512 B replaced at random), then leaves
 * a quarter of its last blocks in a shared hand-off ring, frees the rest and exits, and the main
 * thread at once joins it and starts a successor, until THREADS * SPAWNS workers have run.
 * Lifetimes are staggered (a random LIFE/2..LIFE each), so heaps of exited threads are
 * abandoned, reclaimed or reused while the others keep allocating, and every block taken
 * from the ring is freed by a thread other than its (by then exited) allocator. The pattern of
 * a server with a thread per connection, written from that description for retype's scaling
 * runs (mstress, by contrast, starts and ends all its threads together).
 * usage: transient THREADS SPAWNS_PER_THREAD LIFE */
#include "common.h"
#define SLOTS 256
#define RING 4096
static void *_Atomic ring[RING];
static _Atomic unsigned long ring_pos;
static long life;
/* Exited workers' indices, for the main thread to join and replace. */
static int done[64], ndone;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
struct worker { pthread_t t; int index; uint64_t seed; long ops; } __attribute__((aligned(64)));
static struct worker w[64];
static void *run(void *arg) {
  struct worker *me = arg;
  uint64_t s = me->seed;
  void *slot[SLOTS] = {0};
  long n = life / 2 + rnd(&s) % (life / 2 + 1);
  for (long i = 0; i < n; i++) {
    uint64_t r = rnd(&s);
    unsigned k = r % SLOTS;
    free(slot[k]);
    slot[k] = xmalloc(8 + (r >> 32) % 505);
    *(char *)slot[k] = (char)i;
  }
  for (int k = 0; k < SLOTS; k++) {
    if (k % 4 == 0) { /* hand off: whoever left a block at this ring position, free theirs */
      unsigned long at = __atomic_fetch_add(&ring_pos, 1, __ATOMIC_RELAXED) % RING;
      free(__atomic_exchange_n(&ring[at], slot[k], __ATOMIC_ACQ_REL));
    } else {
      free(slot[k]);
    }
  }
  me->ops = n + SLOTS;
  pthread_mutex_lock(&mu); done[ndone++] = me->index; pthread_cond_signal(&cv); pthread_mutex_unlock(&mu);
  return 0;
}
int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  long spawns = argc > 2 ? atol(argv[2]) : 500;
  life = argc > 3 ? atol(argv[3]) : 2000;
  if (threads < 1 || threads > 64 || spawns < 1 || life < 2) { fprintf(stderr, "usage: transient THREADS(1-64) SPAWNS_PER_THREAD LIFE\n"); return 2; }
  uint64_t s = 31337;
  double ops = 0;
  long started = 0, total = spawns * threads;
  double t0 = now_s();
  for (int i = 0; i < threads; i++) { w[i].index = i; w[i].seed = rnd(&s) | 1; pthread_create(&w[i].t, 0, run, &w[i]); started++; }
  for (long finished = 0; finished < total; finished++) {
    pthread_mutex_lock(&mu);
    while (ndone == 0) pthread_cond_wait(&cv, &mu);
    int i = done[--ndone];
    pthread_mutex_unlock(&mu);
    pthread_join(w[i].t, 0);
    ops += w[i].ops;
    if (started < total) { w[i].seed = rnd(&s) | 1; pthread_create(&w[i].t, 0, run, &w[i]); started++; }
  }
  double dt = now_s() - t0;
  for (int k = 0; k < RING; k++) free(ring[k]);
  report(ops, dt);
  return 0;
}
