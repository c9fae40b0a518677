/* Commits the heap error named by argv[1] on a block of argv[2] bytes, for the tests of
 * hardened mode's measures; "clean" stays in bounds and prints "clean". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* Keeps the compiler from removing or moving the allocations and the bad accesses. */
void *volatile sink;
/* A one-byte error flips bits of the byte it hits: writing a fixed value would leave a canary
 * byte that happens to hold that value (one chance in 256) unchanged, and so uncaught. */
static void flip(char *b) { *(volatile char *)b ^= 0x5a; }
/* Whether all n bytes at p are c: a keyed pattern matches c in one byte by chance (one time in
 * 256), not in all of them. */
static int all(const volatile char *p, size_t n, char c) {
  for (size_t i = 0; i < n; i++) if (p[i] != c) return 0;
  return 1;
}
/* n bytes of 'A' to copy from, apart from the heap. */
static const char *source(size_t n) {
  static char bytes[(2 << 20) + 64];
  if (n > sizeof bytes) abort();
  memset(bytes, 'A', n);
  return bytes;
}
int main(int argc, char **argv) {
  /* Unbuffered: what a case prints is seen even when a check at exit aborts. */
  setvbuf(stdout, 0, _IONBF, 0);
  const char *what = argc > 1 ? argv[1] : "";
  size_t n = argc > 2 ? strtoul(argv[2], 0, 10) : 8;
  char *before = malloc(n), *p = malloc(n);
  sink = before; sink = p;
  memset(p, 'a', n);
  if (!strcmp(what, "overflow-1")) { memset(p, 'A', n); flip(p + n); }
  else if (!strcmp(what, "overflow-32")) memset(p, 'A', n + 32);
  else if (!strcmp(what, "overflow-block")) memset(p, 'A', 2 * n);
  else if (!strcmp(what, "underflow-1")) flip(p - 1);
  else if (!strcmp(what, "underflow-32")) memset(p - 32, 'A', 32);
  else if (!strcmp(what, "overflow-memcpy")) memcpy(p, source(n + 32), n + 32);
  else if (!strcmp(what, "underflow-memcpy")) memcpy(p - 32, source(32), 32);
  else if (!strcmp(what, "overflow-realloc")) { flip(p + n); p = realloc(p, 2 * n); }
  else if (!strcmp(what, "zero-read")) { char *z = malloc(0); printf("%d\n", z[0]); }
  else if (!strcmp(what, "zero-write")) { char *z = malloc(0); sink = z; z[0] = 'A'; }
  else if (!strcmp(what, "zero-calloc")) { char *z = calloc(0, 8); sink = z; z[0] = 'A'; }
  else if (!strcmp(what, "zero-free")) {
    char *z = malloc(0), *y = malloc(0);
    if (!z || !y) return 3;
    free(z);
    y = realloc(y, n);
    memset(y, 'y', n);
    free(y);
    free(realloc(malloc(0), 0));
  }
  else if (!strcmp(what, "write-after-free")) {
    free(p);
    flip(p + n / 2); /* through a volatile access: the compiler drops stores to freed memory */
    /* Push the block out of quarantine: free more than its byte bound after it. */
    for (int i = 0; i < 4096; i++) { sink = malloc(n); free(sink); }
    p = malloc(n);
  }
  else if (!strcmp(what, "read-after-free")) {
    free(p);
    char *q = malloc(n);
    memset(q, 'q', n);
    printf("%s\n", q == p ? "reused" : all(p, n, 'a') ? "old data" : all(p, n, 'q') ? "new owner's data" : "junk");
    free(q);
    return 0;
  }
  else if (!strcmp(what, "reuse")) {
    free(p);
    char *q = malloc(n), *r = realloc(malloc(n / 2 + 1), n);
    printf("%s\n", q == p || r == p ? "reused" : "not reused");
    return 0;
  }
  else if (!strcmp(what, "poison")) {
    /* A write after free puts an address of the attacker's choosing in the freed block's
     * free-list link, hoping a later malloc hands it out. */
    static char target[64] __attribute__((aligned(16)));
    free(p);
    *(void *volatile *)p = target;
    /* Through `sink`, so the compiler cannot assume malloc's result is not `target`. */
    sink = malloc(n);
    char *q = sink;
    sink = malloc(n);
    char *r = sink;
    printf("%s\n", q == target || r == target ? "poisoned" : "not poisoned");
    return 0;
  }
  else if (!strcmp(what, "order")) {
    /* Whether the next 32 blocks come in address order: equal steps up. */
    char *q[32];
    int ordered = 1;
    for (int i = 0; i < 32; i++) q[i] = malloc(n);
    for (int i = 2; i < 32; i++) ordered &= q[i] - q[i - 1] == q[1] - q[0] && q[1] > q[0];
    printf("%s\n", ordered ? "address order" : "shuffled");
    return 0;
  }
  else if (!strcmp(what, "execute")) {
    p[0] = (char)0xc3; /* x86-64 `ret`: returns at once if the heap were executable */
    ((void (*)(void))(void *)p)();
  }
  else if (strcmp(what, "clean")) { printf("unknown case %s\n", what); return 2; }
  free(p);
  free(before);
  printf("%s\n", what);
  return 0;
}
