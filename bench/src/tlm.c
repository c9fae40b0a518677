/* tlm: seed 003's experiment (Coleman and Zalewski 2013, TLM), written from the paper's
 * description. THREADS worker threads start together and each runs ROUNDS growing rounds, then
 * STEADY rounds at the largest size: growing round k (1..ROUNDS) allocates k*BLOCKS blocks of
 * SIZE bytes, writes one byte in every 4 KiB page of each block (the touch that makes a
 * demand-paging kernel map it), then frees them in allocation order; a steady round does the
 * same with ROUNDS*BLOCKS blocks, so after the growing rounds the program needs no more memory.
 *
 * Before its first round and after each round a worker samples its own timers, as TLM does:
 * CLOCK_MONOTONIC (its lifetime), CLOCK_THREAD_CPUTIME_ID (its CPU time, exact to the ns) and
 * getrusage(RUSAGE_THREAD) (user and system time as the kernel splits them, minor faults).
 * The workers' only malloc-family calls are the blocks' mallocs and frees (their bookkeeping is
 * mmap'd), so a recording of the run can be checked call for call. Each worker names itself
 * (prctl PR_SET_NAME) "tlm-grow" before its first round, "tlm-steady" before its first steady
 * round and "tlm-done" after its last, so a system-call trace (strace -f) shows the phases.
 *
 * With TLM_SMAPS=PATH in the environment (a run of its own, not timed), the workers also meet at
 * the peak (the last growing round's blocks all allocated and touched, none freed) and worker 0
 * copies /proc/self/smaps to PATH, with read and write on a static buffer, so that no malloc call
 * is added; then it appends the line "tlm-own BYTES RESIDENT": the program's own anonymous memory
 * (its tables and the workers' stacks, which it maps itself) and the part of it resident
 * (mincore), so that what is left of the anonymous mappings is the allocator's.
 *
 * Output on stdout, after every worker has finished:
 *   tlm threads=T size=S rounds=R steady=S blocks=B
 *   sample THREAD TID ROUND BLOCKS MONO_NS CPU_NS USER_US SYS_US MINFLT     (ROUND 0: the start)
 * usage: tlm THREADS SIZE ROUNDS STEADY BLOCKS */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct sample { long round, blocks; uint64_t mono_ns, cpu_ns, user_us, sys_us, minflt; };
struct worker { pthread_t id; int index; pid_t tid; struct sample *samples; char **blocks; };

static long size, rounds, steady, per_round;
static pthread_barrier_t start;

static uint64_t clock_ns(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t us(struct timeval t) { return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_usec; }

/* The start sample reads the lifetime clock before the CPU clock, the others after it, so that
 * the CPU time since the start never exceeds the lifetime since the start. */
static void take(struct sample *s, long round, long blocks) {
  struct rusage ru;
  s->round = round;
  s->blocks = blocks;
  if (round == 0) s->mono_ns = clock_ns(CLOCK_MONOTONIC);
  getrusage(RUSAGE_THREAD, &ru);
  s->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  if (round != 0) s->mono_ns = clock_ns(CLOCK_MONOTONIC);
  s->user_us = us(ru.ru_utime);
  s->sys_us = us(ru.ru_stime);
  s->minflt = (uint64_t)ru.ru_minflt;
}

static const char *smaps; /* TLM_SMAPS, or null */
static pthread_barrier_t meet;
enum { MAX_OWN = 4096 };
static struct { void *at; size_t bytes; } own[MAX_OWN]; /* the program's own mappings */
static int owned;

/* Fresh zeroed memory of the program's own, kept in own[]. */
static void *own_pages(size_t bytes, int flags) {
  void *p = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
  if (p == MAP_FAILED) { perror("tlm: mmap"); exit(1); }
  if (owned == MAX_OWN) { fprintf(stderr, "tlm: more than %d mappings of its own\n", MAX_OWN); exit(2); }
  own[owned].at = p;
  own[owned++].bytes = bytes;
  return p;
}

static void *zeroed_pages(size_t bytes) { return own_pages(bytes, MAP_POPULATE); }

/* With TLM_SMAPS: every worker waits here; worker 0 copies /proc/self/smaps there while the
 * others wait again. */
static void snapshot(struct worker *w) {
  static char buf[1 << 16];
  if (!smaps) return;
  pthread_barrier_wait(&meet);
  if (w->index == 0) {
    int in = open("/proc/self/smaps", O_RDONLY), out = open(smaps, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0) { perror("tlm: smaps snapshot"); exit(1); }
    for (ssize_t n; (n = read(in, buf, sizeof buf)) > 0;)
      if (write(out, buf, (size_t)n) != n) { perror("tlm: smaps snapshot"); exit(1); }
    size_t bytes = 0, resident = 0, page = 4096;
    for (int i = 0; i < owned; i++) {
      bytes += (own[i].bytes + page - 1) / page * page;
      for (size_t off = 0; off < own[i].bytes; off += sizeof buf * page) {
        size_t len = own[i].bytes - off < sizeof buf * page ? own[i].bytes - off : sizeof buf * page;
        if (mincore((char *)own[i].at + off, len, (unsigned char *)buf)) { perror("tlm: mincore"); exit(1); }
        for (size_t p = 0; p < (len + page - 1) / page; p++) resident += (buf[p] & 1) * page;
      }
    }
    dprintf(out, "tlm-own %zu %zu\n", bytes, resident);
    close(in);
    close(out);
  }
  pthread_barrier_wait(&meet);
}

static void *run(void *arg) {
  struct worker *w = arg;
  w->tid = gettid();
  pthread_barrier_wait(&start);
  prctl(PR_SET_NAME, "tlm-grow");
  take(&w->samples[0], 0, 0);
  for (long k = 1; k <= rounds + steady; k++) {
    if (k == rounds + 1) prctl(PR_SET_NAME, "tlm-steady");
    long n = (k <= rounds ? k : rounds) * per_round;
    for (long i = 0; i < n; i++) {
      char *p = malloc((size_t)size);
      if (!p) { fprintf(stderr, "tlm: malloc(%ld) failed in round %ld\n", size, k); exit(1); }
      for (long off = 0; off < size; off += 4096) p[off] = (char)k;
      w->blocks[i] = p;
    }
    if (k == rounds) snapshot(w);
    for (long i = 0; i < n; i++) free(w->blocks[i]);
    take(&w->samples[k], k, n);
  }
  prctl(PR_SET_NAME, "tlm-done");
  return 0;
}

static long arg(char **argv, int i, long min) {
  char *end;
  long v = strtol(argv[i], &end, 10);
  if (*end || v < min) { fprintf(stderr, "tlm: argument %d must be a whole number >= %ld, not '%s'\n", i, min, argv[i]); exit(2); }
  return v;
}

int main(int argc, char **argv) {
  if (argc != 6) { fprintf(stderr, "usage: tlm THREADS SIZE ROUNDS STEADY BLOCKS\n"); return 2; }
  long threads = arg(argv, 1, 1);
  size = arg(argv, 2, 1);
  rounds = arg(argv, 3, 1);
  steady = arg(argv, 4, 0);
  per_round = arg(argv, 5, 1);
  smaps = getenv("TLM_SMAPS");
  struct worker *w = zeroed_pages(sizeof *w * (size_t)threads);
  pthread_barrier_init(&start, 0, (unsigned)threads);
  pthread_barrier_init(&meet, 0, (unsigned)threads);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  enum { STACK = 1 << 20 };
  for (long t = 0; t < threads; t++) {
    w[t].index = (int)t;
    w[t].samples = zeroed_pages(sizeof(struct sample) * (size_t)(rounds + steady + 1));
    w[t].blocks = zeroed_pages(sizeof(char *) * (size_t)(rounds * per_round));
  }
  for (long t = 0; t < threads; t++)
    if (pthread_attr_setstack(&attr, own_pages(STACK, MAP_STACK), STACK) ||
        pthread_create(&w[t].id, &attr, run, &w[t])) { fprintf(stderr, "tlm: cannot start thread %ld\n", t); return 1; }
  for (long t = 0; t < threads; t++) pthread_join(w[t].id, 0);
  printf("tlm threads=%ld size=%ld rounds=%ld steady=%ld blocks=%ld\n", threads, size, rounds, steady, per_round);
  for (long t = 0; t < threads; t++)
    for (long k = 0; k <= rounds + steady; k++) {
      struct sample *s = &w[t].samples[k];
      printf("sample %ld %d %ld %ld %llu %llu %llu %llu %llu\n", t, (int)w[t].tid, s->round, s->blocks,
             (unsigned long long)s->mono_ns, (unsigned long long)s->cpu_ns, (unsigned long long)s->user_us,
             (unsigned long long)s->sys_us, (unsigned long long)s->minflt);
    }
  return 0;
}
