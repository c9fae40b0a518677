/* memaccess (seed 004's memory-access micro benchmark, written from the seed's description):
 * one allocation of MAX_MIB MiB holds a doubly linked list of 64-byte nodes; the working set
 * doubles from one node (64 B) while it is smaller than the block, and for each working set
 * the list is built over the block's first bytes, sequentially (node i links to node i+1, as
 * the seed's configuration) or in a random order (a random cyclic permutation of the nodes),
 * then walked PASSES times from its head back to it, by the main thread (THREADS 0, as the
 * seed's configuration) or by THREADS threads at once, each walking the whole list.
 * The random order is drawn with an index array mapped apart (mmap), so the allocator serves
 * nothing but the block. Before the block is freed, the share of the largest list that the
 * kernel backs with huge pages is read from /proc/self/smaps: the AnonHugePages of every
 * mapping that overlaps the list, at most the list's size (exact when the block has mappings
 * of its own; an allocator that puts other data beside it in a mapping can only be overstated).
 * usage: memaccess MAX_MIB seq|random PASSES THREADS
 * prints "list_kib=... huge_kib=... huge_share=... walk_secs=..." (walk_secs: the walks alone,
 * without building the lists) and "ops=... secs=..." (node visits, the whole run). */
#include "common.h"
#include <sys/mman.h>

typedef struct node { struct node *next, *prev; long pad[6]; } node;

static node *head;
static long passes;

static void *walk(void *arg) {
  long *sum = arg;
  for (long p = 0; p < passes; p++) {
    node *n = head;
    do { *sum += n->pad[0]; n = n->next; } while (n != head);
  }
  return 0;
}

/* Links nodes 0..n-1 of `base` into a cycle in the order `order` (NULL: 0, 1, 2, ...). */
static void link(node *base, long n, const uint32_t *order) {
  for (long i = 0; i < n; i++) {
    node *a = &base[order ? order[i] : i], *b = &base[order ? order[(i + 1) % n] : (i + 1) % n];
    a->next = b;
    b->prev = a;
    a->pad[0] = i;
  }
  head = &base[order ? order[0] : 0];
}

/* AnonHugePages (kB) of the mappings overlapping [lo, hi). */
static long huge_kib(uintptr_t lo, uintptr_t hi) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  long total = 0;
  int overlaps = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b;
    long kb;
    if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) overlaps = a < hi && b > lo;
    else if (overlaps && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) total += kb;
  }
  fclose(f);
  return total;
}

int main(int argc, char **argv) {
  if (argc != 5 || (strcmp(argv[2], "seq") && strcmp(argv[2], "random"))) {
    fprintf(stderr, "usage: memaccess MAX_MIB seq|random PASSES THREADS\n");
    return 2;
  }
  size_t max = (size_t)atol(argv[1]) << 20;
  int random_order = !strcmp(argv[2], "random");
  passes = atol(argv[3]);
  int threads = atoi(argv[4]);
  if (max < 2 * sizeof(node) || passes < 1 || threads < 0 || threads > 64) {
    fprintf(stderr, "memaccess: MAX_MIB >= 1, PASSES >= 1, 0 <= THREADS <= 64\n");
    return 2;
  }
  double t0 = now_s();
  node *block = xmalloc(max);
  long most = (long)(max / 2 / sizeof(node)); /* the largest working set: < max, a power of two */
  uint32_t *order = 0;
  if (random_order) {
    order = mmap(0, most * sizeof *order, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (order == MAP_FAILED) { perror("memaccess: mmap"); return 1; }
  }
  uint64_t seed = 2024;
  double visits = 0, walking = 0;
  long sums[64] = {0};
  long n = 1;
  for (size_t ws = sizeof(node); ws < max; ws *= 2, n *= 2) {
    if (random_order) {
      for (long i = 0; i < n; i++) order[i] = (uint32_t)i;
      for (long i = n - 1; i > 0; i--) { long j = (long)(rnd(&seed) % (uint64_t)(i + 1)); uint32_t t = order[i]; order[i] = order[j]; order[j] = t; }
    }
    link(block, n, order);
    double w0 = now_s();
    if (threads == 0) {
      walk(&sums[0]);
      visits += (double)passes * n;
    } else {
      pthread_t t[64];
      for (int i = 0; i < threads; i++) pthread_create(&t[i], 0, walk, &sums[i]);
      for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
      visits += (double)passes * n * threads;
    }
    walking += now_s() - w0;
  }
  double secs = now_s() - t0;
  long list_kib = most * (long)sizeof(node) / 1024;
  long huge = huge_kib((uintptr_t)block, (uintptr_t)block + (uintptr_t)most * sizeof(node));
  if (huge > list_kib) huge = list_kib;
  long check = 0;
  for (int i = 0; i < 64; i++) check += sums[i];
  printf("list_kib=%ld huge_kib=%ld huge_share=%.3f walk_secs=%.4f check=%ld\n", list_kib, huge, (double)huge / list_kib,
         walking, check);
  free(block);
  report(visits, secs);
  return 0;
}
