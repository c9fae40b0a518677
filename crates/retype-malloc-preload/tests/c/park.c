/* A thread waiting in pthread_join parks its heap (retype-malloc). Two cases, each printing OK:
 *   park adopt  main allocates blocks, then joins a thread, which waits until main sleeps in
 *               the join, frees them and allocates: its block must lie in their 2 MiB segment
 *               (it adopted main's parked heap; a new heap would start a segment of its own).
 *   park back   main frees a block and joins a thread, which allocates first (getting a heap
 *               of its own), waits until main sleeps in the join, and exits (its heap goes to
 *               the pool after main's): main's next malloc of that size must return the block
 *               it freed (it took its own heap back, not the one abandoned last).
 * usage: park adopt|back */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define N 64
static void *blocks[N];
static pid_t main_tid;
static volatile int joining, ready;
static int reused;

/* Waits until main has announced the join and sleeps in a futex: then it is inside
 * pthread_join, past the park (no other futex is used by main after the announcement). */
static void wait_for_main_in_join(void) {
  char path[64], line[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)main_tid);
  while (!joining) sched_yield();
  for (;;) {
    FILE *f = fopen(path, "r");
    if (!f) { perror(path); exit(2); }
    int got = fgets(line, sizeof line, f) != 0;
    fclose(f);
    if (got && atoi(line) == SYS_futex && strncmp(line, "running", 7)) return;
    sched_yield();
  }
}

static void *adopter(void *arg) {
  (void)arg;
  wait_for_main_in_join();
  for (int i = 0; i < N; i++) free(blocks[i]);
  void *p = malloc(48);
  reused = (uintptr_t)p >> 21 == (uintptr_t)blocks[0] >> 21;
  free(p);
  return 0;
}

static void *allocator(void *arg) {
  (void)arg;
  void *volatile own = malloc(48); /* volatile: the compiler may not drop the pair */
  free(own);
  ready = 1;
  wait_for_main_in_join();
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "adopt") && strcmp(argv[1], "back"))) {
    fprintf(stderr, "usage: park adopt|back\n");
    return 2;
  }
  int adopt = !strcmp(argv[1], "adopt");
  main_tid = (pid_t)syscall(SYS_gettid);
  for (int i = 0; i < N; i++) blocks[i] = malloc(48);
  setvbuf(stdout, 0, _IONBF, 0);
  pthread_t t;
  if (adopt) {
    pthread_create(&t, 0, adopter, 0);
  } else {
    free(blocks[N - 1]);
    pthread_create(&t, 0, allocator, 0);
    while (!ready) sched_yield();
  }
  joining = 1;
  pthread_join(t, 0);
  if (!adopt) {
    void *p = malloc(48);
    reused = p == blocks[N - 1];
    for (int i = 0; i < N - 1; i++) free(blocks[i]);
    free(p);
  }
  printf(reused ? "OK\n" : "not reused\n");
  return reused ? 0 : 1;
}
