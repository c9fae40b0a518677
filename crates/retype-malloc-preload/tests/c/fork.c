/* Forks repeatedly while four threads allocate and free (also across threads); every child
 * must be able to allocate and exit normally. A deadlocked child is killed by its alarm, set
 * far beyond what 1,000 allocations take on the slowest, busiest machine.
 * Prints OK. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int stop;
static void *_Atomic box;
static void *churn(void *arg) {
  unsigned s = (unsigned)(long)arg;
  void *slot[64] = {0};
  while (!stop) {
    s = s * 1103515245 + 12345;
    int k = (s >> 8) % 64;
    free(slot[k]);
    slot[k] = malloc((s >> 16) % 3000 + 16 + ((s % 97) == 0 ? 300000 : 0));
    memset(slot[k], 1, 16);
    if (s % 5 == 0) slot[k] = __atomic_exchange_n(&box, slot[k], __ATOMIC_ACQ_REL);
  }
  for (int k = 0; k < 64; k++) free(slot[k]);
  return 0;
}
int main(void) {
  pthread_t t[4];
  for (long i = 0; i < 4; i++) pthread_create(&t[i], 0, churn, (void *)i);
  for (int f = 0; f < 100; f++) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(300);
      void *p[1000];
      for (int i = 0; i < 1000; i++) { p[i] = malloc(i * 13 % 5000 + 1); memset(p[i], 2, 1); }
      for (int i = 0; i < 1000; i++) free(p[i]);
      void *big = malloc(1 << 22); free(big);
      _exit(0);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      printf("FAIL child %d status %d\n", f, status);
      return 1;
    }
  }
  stop = 1;
  for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
  free(box);
  printf("OK\n");
  return 0;
}
