/* stall: the machine's floor for the worst case of a call. THREADS threads each run SECS
 * seconds of tiny "calls" (200 loop steps, no allocation, no system call) timed with the TSC,
 * as the recorder times an allocator's calls, and mark each with the kernel's rseq area as the
 * recorder does (docs/trace-format.md): a call during which the thread was descheduled is
 * counted apart. Prints, over all threads, the calls, the descheduled ones, the longest call
 * whose thread ran throughout and how many such calls took over 10 and over 50 us. What a
 * running call loses there is the machine's (interrupts, a hypervisor taking the CPU): no
 * allocator's maximum on this machine can be lower. Not a benchmark of any allocator.
 * usage: stall [THREADS [SECS]]   (defaults 1 2) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/rseq.h>
#include <time.h>
#include <x86intrin.h>

/* A critical section that never runs: the kernel clears rseq_cs when it resumes a thread
 * it switched out, because the thread is outside it. The signature precedes the abort. */
extern char stall_cs_start[], stall_cs_abort[];
__asm__(".pushsection .text\n.globl stall_cs_start\nstall_cs_start: nop\n.long 0x53053053\n"
        ".globl stall_cs_abort\nstall_cs_abort: ud2\n.popsection\n");
static struct rseq_cs cs __attribute__((aligned(32)));

struct result { uint64_t calls, descheduled, max, over10, over50; };
static double secs = 2, ticks_per_us;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *run(void *arg) {
  struct result *r = arg;
  volatile struct rseq *area = (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
  double end = now_s() + secs;
  while (now_s() < end) {
    for (int i = 0; i < 10000; i++) {
      area->rseq_cs = (uintptr_t)&cs;
      uint64_t t0 = __rdtsc();
      for (volatile int k = 0; k < 200; k++) {}
      uint64_t d = __rdtsc() - t0;
      int out = area->rseq_cs == 0;
      area->rseq_cs = 0;
      r->calls++;
      if (out) { r->descheduled++; continue; }
      if (d > r->max) r->max = d;
      r->over10 += d > 10 * ticks_per_us;
      r->over50 += d > 50 * ticks_per_us;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  if (argc > 2) secs = atof(argv[2]);
  if (threads < 1 || threads > 64 || secs <= 0) { fprintf(stderr, "usage: stall [THREADS [SECS]]\n"); return 2; }
  if (__rseq_size == 0) { fprintf(stderr, "stall: glibc registered no rseq area\n"); return 1; }
  cs.start_ip = (uintptr_t)stall_cs_start;
  cs.post_commit_offset = 1;
  cs.abort_ip = (uintptr_t)stall_cs_abort;
  double t0 = now_s();
  uint64_t c0 = __rdtsc();
  while (now_s() - t0 < 0.05) {}
  ticks_per_us = (__rdtsc() - c0) / ((now_s() - t0) * 1e6);
  pthread_t t[64];
  struct result r[64] = {0};
  for (int i = 0; i < threads; i++) pthread_create(&t[i], 0, run, &r[i]);
  struct result all = {0};
  for (int i = 0; i < threads; i++) {
    pthread_join(t[i], 0);
    all.calls += r[i].calls;
    all.descheduled += r[i].descheduled;
    all.over10 += r[i].over10;
    all.over50 += r[i].over50;
    if (r[i].max > all.max) all.max = r[i].max;
  }
  printf("calls=%llu descheduled=%llu max_running_us=%.1f over_10us=%llu over_50us=%llu\n",
         (unsigned long long)all.calls, (unsigned long long)all.descheduled, all.max / ticks_per_us,
         (unsigned long long)all.over10, (unsigned long long)all.over50);
  return 0;
}
