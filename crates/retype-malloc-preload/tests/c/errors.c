/* One heap error of the kind named by argv[1] on a block of argv[2] bytes, as a program with
 * that bug would commit it, for the table of what each mode catches (tests/preload.rs,
 * docs/hardening.md). An error an allocator does not stop runs to the end and prints
 * "missed"; a read prints "stale" if it sees an earlier owner's bytes, else "clean"; a realloc
 * prints "same" if it handed back the address it freed, else "moved". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* Keeps the compiler from removing or moving the allocations and the bad accesses. */
void *volatile sink;
/* memcpy through a volatile pointer: the compiler would drop a copy into a block freed next. */
static void *(*volatile copy)(void *, const void *, size_t) = memcpy;
/* n bytes of 'A' to copy from, apart from the heap. */
static const char *source(size_t n) {
  static char bytes[(1 << 20) + 64];
  if (n > sizeof bytes) abort();
  memset(bytes, 'A', n);
  return bytes;
}
/* Flips the n bytes at p, one by one, through volatile accesses: a direct write that the
 * compiler keeps as written, and that no canary byte survives by chance. */
static void flip(char *p, size_t n) {
  for (size_t i = 0; i < n; i++) ((volatile char *)p)[i] ^= 0x5a;
}
/* Whether the byte at p holds 'S', the secret an earlier owner left. */
static int secret_at(const char *p) { return *(const volatile char *)p == 'S'; }
int main(int argc, char **argv) {
  setvbuf(stdout, 0, _IONBF, 0);
  const char *what = argc > 1 ? argv[1] : "";
  size_t n = argc > 2 ? strtoul(argv[2], 0, 10) : 8;
  char *p = malloc(n);
  sink = p;
  memset(p, 'a', n);
  if (!strcmp(what, "overflow-1")) flip(p + n, 1);
  else if (!strcmp(what, "overflow-32")) flip(p + n, 32);
  else if (!strcmp(what, "overflow-1-memcpy")) copy(p, source(n + 1), n + 1);
  else if (!strcmp(what, "overflow-32-memcpy")) copy(p, source(n + 32), n + 32);
  else if (!strcmp(what, "underflow-1")) flip(p - 1, 1);
  else if (!strcmp(what, "underflow-32")) flip(p - 32, 32);
  else if (!strcmp(what, "underflow-1-memcpy")) copy(p - 1, source(n + 1), n + 1);
  else if (!strcmp(what, "underflow-32-memcpy")) copy(p - 32, source(n + 32), n + 32);
  else if (!strcmp(what, "write-after-free")) {
    /* No later allocation: the program ends. */
    free(p);
    flip(p + n / 2, 1);
    puts("missed");
    return 0;
  } else if (!strcmp(what, "write-after-free-malloc")) {
    free(p);
    flip(p + n / 2, 1);
    for (int i = 0; i < 4096; i++) { sink = malloc(n); free(sink); }
    puts("missed");
    return 0;
  } else if (!strcmp(what, "read-after-free")) {
    memset(p, 'S', n);
    free(p);
    puts(secret_at(p + n / 2) || secret_at(p + n - 1) ? "stale" : "clean");
    return 0;
  } else if (!strcmp(what, "uninitialized-read")) {
    /* Blocks an earlier owner filled with its secret and freed; then fresh ones. */
    enum { K = 64 };
    char *old[K];
    for (int i = 0; i < K; i++) { old[i] = malloc(n); memset(old[i], 'S', n); }
    for (int i = 0; i < K; i++) free(old[i]);
    int stale = 0;
    for (int i = 0; i < K; i++) {
      char *q = malloc(n);
      stale |= secret_at(q + n / 2) || secret_at(q + n - 1);
      sink = q;
    }
    puts(stale ? "stale" : "clean");
    return 0;
  } else if (!strcmp(what, "double-free")) free(p);
  else if (!strcmp(what, "invalid-free")) {
    static char not_heap[64] __attribute__((aligned(16)));
    free(not_heap);
  } else if (!strcmp(what, "interior-free")) { free(p + n / 2); puts("missed"); return 0; }
  else if (!strcmp(what, "realloc-moves")) {
    char *q = realloc(p, n);
    puts(q == p ? "same" : "moved");
    free(q);
    return 0;
  } else if (!strcmp(what, "malloc0-write")) { char *z = malloc(0); sink = z; *(volatile char *)z = 'A'; free(z); }
  else if (!strcmp(what, "malloc0-read")) { char *z = malloc(0); sink = z; printf("%d ", *(volatile char *)z); free(z); }
  else { printf("unknown case %s\n", what); return 2; }
  free(p);
  puts("missed");
  return 0;
}
