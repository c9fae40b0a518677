/* linked list memory access (seed 004): a doubly linked list of 64-byte nodes whose working
 * set doubles from 16 KiB to MAX MiB; each size is traversed sequentially (nodes linked in
 * allocation order) and randomly (nodes linked in shuffled order), several passes each.
 * The random walk is where huge pages cut TLB misses.
 * usage: linkedlist MAX_MIB PASSES */
#include "common.h"
typedef struct node { struct node *next, *prev; long payload[6]; } node;
int main(int argc, char **argv) {
  long max_mib = argc > 1 ? atol(argv[1]) : 256;
  int passes = argc > 2 ? atoi(argv[2]) : 4;
  uint64_t s = 2024; long sum = 0; double ops = 0, t0 = now_s();
  for (long ws = 16 << 10; ws <= max_mib << 20; ws *= 2) {
    long n = ws / sizeof(node);
    node **v = xmalloc(n * sizeof(node *));
    for (long i = 0; i < n; i++) { v[i] = xmalloc(sizeof(node)); v[i]->payload[0] = i; }
    for (int mode = 0; mode < 2; mode++) {
      if (mode == 1) for (long i = n - 1; i > 0; i--) { long j = rnd(&s) % (i + 1); node *t = v[i]; v[i] = v[j]; v[j] = t; }
      for (long i = 0; i < n; i++) { v[i]->next = v[(i + 1) % n]; v[i]->prev = v[(i + n - 1) % n]; }
      long steps = passes * (n < (1 << 20) ? (1 << 20) : n); /* at least 1 M steps per size */
      node *p = v[0];
      for (long k = 0; k < steps; k++) { sum += p->payload[0]; p = p->next; }
      ops += steps;
    }
    for (long i = 0; i < n; i++) free(v[i]);
    free(v);
  }
  printf("sum=%ld\n", sum);
  report(ops, now_s() - t0);
  return 0;
}
