/* A soak of the malloc family: THREADS threads (default 64) for SECONDS seconds allocate blocks
 * of random sizes (malloc, calloc, realloc, posix_memalign, aligned_alloc), hand blocks to one
 * another through producer/consumer queues (so most frees meet a block another thread
 * allocated), fork (the child checks and frees the blocks it inherited, allocates and frees
 * more, starts a thread, and exits; its exit code is checked), and exit after a random number
 * of rounds, each leaving its live blocks to the queues, while the main thread joins them and
 * starts new ones.
 *
 * Every block is filled at allocation with a pattern drawn from its own seed and checked
 * whole when it is freed (and its kept part after realloc): a block handed out twice, written
 * by the allocator or moved without its contents shows as a corrupted block, and the program
 * aborts naming it. Prints its counts and OK.
 *
 *   soak SECONDS [THREADS [SEED]]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A live block: where it is, how long, and the seed of its pattern. */
struct block {
  unsigned char *p;
  size_t size;
  uint64_t seed;
};

enum { SLOTS = 128, QUEUES = 16, QUEUE_CAP = 256, MAX_THREADS = 1024 };

/* xorshift64*: each thread's own random numbers. */
static uint64_t next(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1DULL;
}

static uint64_t word_at(uint64_t seed, size_t i) { return seed ^ (i * 0x9E3779B97F4A7C15ULL); }

/* Byte i of the block's pattern. */
static unsigned char byte_at(uint64_t seed, size_t i) {
  return (unsigned char)(word_at(seed, i / 8) >> (8 * (i % 8)));
}

/* Fills bytes [from, to) of the block with its pattern, a word at a time where it can. */
static void fill(const struct block *b, size_t from, size_t to) {
  size_t i = from;
  for (; i < to && i % 8; i++) b->p[i] = byte_at(b->seed, i);
  for (; i + 8 <= to; i += 8) {
    uint64_t w = word_at(b->seed, i / 8);
    memcpy(b->p + i, &w, 8);
  }
  for (; i < to; i++) b->p[i] = byte_at(b->seed, i);
}

static _Noreturn void corrupt(const struct block *b, size_t at, const char *what) {
  fprintf(stderr, "soak: corrupted block %p of %zu bytes at offset %zu (%s)\n", (void *)b->p,
          b->size, at, what);
  abort();
}

/* Checks bytes [0, to) against the pattern, a word at a time where it can. */
static void check(const struct block *b, size_t to, const char *what) {
  size_t i = 0;
  for (; i + 8 <= to; i += 8) {
    uint64_t w;
    memcpy(&w, b->p + i, 8);
    if (w != word_at(b->seed, i / 8)) corrupt(b, i, what);
  }
  for (; i < to; i++)
    if (b->p[i] != byte_at(b->seed, i)) corrupt(b, i, what);
}

static void release(struct block *b, const char *what) {
  if (!b->p) return;
  check(b, b->size, what);
  free(b->p);
  b->p = NULL;
}

/* Mostly small sizes, some of a few pages, a few of megabytes; zero too. */
static size_t random_size(uint64_t *s) {
  uint64_t r = next(s);
  switch (r % 100) {
    case 0: return r % 4 ? (r >> 8) % 65536 : (r >> 8) % (4 << 20);
    case 1 ... 9: return (r >> 8) % 16384;
    case 10: return 0;
    default: return (r >> 8) % 1024 + 1;
  }
}

static void fail(const char *what) {
  fprintf(stderr, "soak: %s\n", what);
  abort();
}

/* A new block of a random size by one of the allocating functions, filled with its pattern. */
static struct block make(uint64_t *s) {
  struct block b = {0, random_size(s), next(s)};
  uint64_t how = next(s) % 8;
  if (how == 0) {
    size_t n = b.size / 16 + 1;
    b.size = n * 16;
    b.p = calloc(n, 16);
    if (!b.p) fail("calloc failed");
    for (size_t i = 0; i < b.size; i++)
      if (b.p[i]) fail("calloc gave a block not zeroed");
  } else if (how == 1) {
    size_t align = (size_t)16 << (next(s) % 9); /* 16 B to 4 KiB */
    void *p = NULL;
    if (posix_memalign(&p, align, b.size)) fail("posix_memalign failed");
    if ((uintptr_t)p % align) fail("posix_memalign gave a misaligned block");
    b.p = p;
  } else if (how == 2) {
    size_t align = (size_t)64 << (next(s) % 4);
    b.size = (b.size + align - 1) / align * align;
    b.p = aligned_alloc(align, b.size);
    if (!b.p || (uintptr_t)b.p % align) fail("aligned_alloc failed or misaligned");
  } else {
    b.p = malloc(b.size);
    if (!b.p) fail("malloc failed");
  }
  if ((uintptr_t)b.p % 16) fail("a block not aligned to 16 bytes");
  if (malloc_usable_size(b.p) < b.size) fail("malloc_usable_size below the size asked");
  fill(&b, 0, b.size);
  return b;
}

/* realloc to a random size: the kept part must hold its pattern, the rest is filled. */
static void resize(struct block *b, uint64_t *s) {
  size_t size = random_size(s) + 1;
  unsigned char *p = realloc(b->p, size);
  if (!p) fail("realloc failed");
  size_t kept = size < b->size ? size : b->size;
  b->p = p;
  b->size = size;
  check(b, kept, "after realloc");
  fill(b, kept, size);
}

/* A bounded queue of blocks between threads. */
struct queue {
  pthread_mutex_t lock;
  struct block items[QUEUE_CAP];
  size_t head, len;
};
static struct queue queues[QUEUES];

static int put(struct queue *q, struct block b) {
  pthread_mutex_lock(&q->lock);
  int ok = q->len < QUEUE_CAP;
  if (ok) q->items[(q->head + q->len++) % QUEUE_CAP] = b;
  pthread_mutex_unlock(&q->lock);
  return ok;
}

static int take(struct queue *q, struct block *b) {
  pthread_mutex_lock(&q->lock);
  int ok = q->len > 0;
  if (ok) {
    *b = q->items[q->head];
    q->head = (q->head + 1) % QUEUE_CAP;
    q->len--;
  }
  pthread_mutex_unlock(&q->lock);
  return ok;
}

static atomic_int stop;
static atomic_long allocations, handed, forks, threads_started, reallocs;
static atomic_int forking; /* children alive now, to bound forks in flight */

static void *child_thread(void *arg) {
  uint64_t *s = arg;
  for (int i = 0; i < 200; i++) {
    struct block b = make(s);
    release(&b, "child thread");
  }
  return NULL;
}

/* In the child of a fork: checks and frees the blocks the forking thread held, churns, starts
 * and joins a thread, and exits 0. A failed check aborts, which the parent sees. */
static _Noreturn void child(struct block *slots, uint64_t seed) {
  alarm(120); /* a child that deadlocks dies, and the parent reports it */
  for (int i = 0; i < SLOTS; i++) release(&slots[i], "inherited by the child");
  uint64_t s = seed | 1;
  struct block kept[64] = {{0}};
  for (int i = 0; i < 2000; i++) {
    struct block *b = &kept[next(&s) % 64];
    release(b, "in the child");
    *b = make(&s);
  }
  pthread_t t;
  uint64_t ts = next(&s) | 1;
  if (pthread_create(&t, NULL, child_thread, &ts) || pthread_join(t, NULL)) exit(3);
  for (int i = 0; i < 64; i++) release(&kept[i], "in the child");
  exit(0);
}

static void fork_child(struct block *slots, uint64_t *s) {
  if (atomic_fetch_add(&forking, 1) >= 4) {
    atomic_fetch_sub(&forking, 1);
    return;
  }
  uint64_t seed = next(s);
  pid_t pid = fork();
  if (pid == 0) child(slots, seed);
  if (pid < 0) {
    atomic_fetch_sub(&forking, 1);
    if (errno == EAGAIN || errno == ENOMEM) return; /* the machine's limits, not a fault */
    fail("fork failed");
  }
  int status;
  if (waitpid(pid, &status, 0) != pid) fail("waitpid failed");
  atomic_fetch_sub(&forking, 1);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "soak: child %d ended with status 0x%x\n", (int)pid, status);
    abort();
  }
  atomic_fetch_add(&forks, 1);
}

/* A worker: a random number of rounds of allocating, freeing, resizing, handing off and
 * taking blocks; then it leaves its blocks to the queues (freeing those that do not fit)
 * and exits. */
static void *worker(void *arg) {
  uint64_t s = (uint64_t)(uintptr_t)arg;
  struct block slots[SLOTS] = {{0}};
  long rounds = (long)(next(&s) % 5000) + 100;
  for (long r = 0; r < rounds && !atomic_load_explicit(&stop, memory_order_relaxed); r++) {
    uint64_t what = next(&s) % 1000;
    struct block *b = &slots[next(&s) % SLOTS];
    struct queue *q = &queues[next(&s) % QUEUES];
    if (what < 500) {
      release(b, "freed by its thread");
      *b = make(&s);
      atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    } else if (what < 600) {
      if (b->p) {
        resize(b, &s);
        atomic_fetch_add_explicit(&reallocs, 1, memory_order_relaxed);
      }
    } else if (what < 800) {
      if (b->p && put(q, *b)) {
        b->p = NULL;
        atomic_fetch_add_explicit(&handed, 1, memory_order_relaxed);
      }
    } else if (what < 999) {
      struct block got;
      if (take(q, &got)) {
        release(b, "freed by its thread");
        *b = got;
        check(b, b->size, "taken from a queue");
      }
    } else if (next(&s) % 8 == 0) {
      fork_child(slots, &s);
    }
  }
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].p && !put(&queues[i % QUEUES], slots[i])) release(&slots[i], "at thread exit");
  return NULL;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: soak SECONDS [THREADS [SEED]]\n");
    return 2;
  }
  double seconds = atof(argv[1]);
  int n = argc > 2 ? atoi(argv[2]) : 64;
  uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 0) : (uint64_t)time(NULL);
  if (n < 1 || n > MAX_THREADS) {
    fprintf(stderr, "soak: THREADS must be 1 to %d\n", MAX_THREADS);
    return 2;
  }
  printf("seed %llu, %d threads, %g s\n", (unsigned long long)seed, n, seconds);
  fflush(stdout);
  for (int i = 0; i < QUEUES; i++) pthread_mutex_init(&queues[i].lock, NULL);
  uint64_t s = seed * 2 + 1;
  pthread_t threads[MAX_THREADS];
  for (int i = 0; i < n; i++) {
    if (pthread_create(&threads[i], NULL, worker, (void *)(uintptr_t)(next(&s) | 1)))
      fail("pthread_create failed");
    atomic_fetch_add(&threads_started, 1);
  }
  /* Joins each thread and starts another in its place until the time is up; a thread that
   * has not ended yet is waited for on a later pass. */
  double end = now() + seconds;
  while (now() < end) {
    for (int i = 0; i < n && now() < end; i++) {
      if (pthread_tryjoin_np(threads[i], NULL) == 0) {
        if (pthread_create(&threads[i], NULL, worker, (void *)(uintptr_t)(next(&s) | 1)))
          fail("pthread_create failed");
        atomic_fetch_add(&threads_started, 1);
      }
    }
    usleep(1000);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < n; i++) pthread_join(threads[i], NULL);
  long left = 0;
  for (int i = 0; i < QUEUES; i++) {
    struct block b;
    while (take(&queues[i], &b)) {
      release(&b, "left in a queue");
      left++;
    }
  }
  printf("allocations %ld, reallocs %ld, handed over %ld, freed at the end %ld, forks %ld, "
         "threads %ld\n",
         atomic_load(&allocations), atomic_load(&reallocs), atomic_load(&handed), left,
         atomic_load(&forks), atomic_load(&threads_started));
  printf("OK\n");
  return 0;
}
