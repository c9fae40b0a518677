/* rptest-like: threads allocate batches of blocks of 8..16000 bytes (linearly falling
 * probability), touch them, and free a share of each batch from a neighbouring thread's
 * batch (cross-thread frees through a per-thread mailbox).
 * usage: rptest THREADS LOOPS BATCH */
#include "common.h"
static int nthreads, loops, batch;
static void **_Atomic mailbox[64];
static size_t linear_falloff(uint64_t *s) {
  uint64_t a = rnd(s) % 15993, b = rnd(s) % 15993;
  return 8 + (a < b ? a : b); /* min of two uniforms: density falls linearly */
}
static void *run(void *arg) {
  long id = (long)arg; uint64_t s = 7 + id;
  for (int l = 0; l < loops; l++) {
    void **blocks = xmalloc(batch * sizeof(void *));
    for (int i = 0; i < batch; i++) { size_t n = linear_falloff(&s); blocks[i] = xmalloc(n); memset(blocks[i], 3, n < 128 ? n : 128); }
    for (int i = 0; i < batch / 2; i++) free(blocks[i]);
    /* hand the other half to the next thread; free whatever it handed to us */
    void **given = __atomic_exchange_n(&mailbox[(id + 1) % nthreads], blocks, __ATOMIC_ACQ_REL);
    if (given) { for (int i = batch / 2; i < batch; i++) free(given[i]); free(given); }
  }
  return 0;
}
int main(int argc, char **argv) {
  nthreads = argc > 1 ? atoi(argv[1]) : 2;
  loops = argc > 2 ? atoi(argv[2]) : 2000;
  batch = argc > 3 ? atoi(argv[3]) : 1000;
  pthread_t t[64];
  double t0 = now_s();
  for (long i = 0; i < nthreads; i++) pthread_create(&t[i], 0, run, (void *)i);
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], 0);
  for (int i = 0; i < nthreads; i++) if (mailbox[i]) { for (int k = batch / 2; k < batch; k++) free(mailbox[i][k]); free(mailbox[i]); }
  report((double)nthreads * loops * batch * 2, now_s() - t0);
  return 0;
}
