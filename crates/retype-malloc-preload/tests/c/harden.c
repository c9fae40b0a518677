/* Commits the heap error named by argv[1] on a block of argv[2] bytes, for the tests of
 * hardened mode's measures; "clean" stays in bounds and prints "clean". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* Keeps the compiler from removing or moving the allocations and the bad accesses. */
void *volatile sink;
int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "";
  size_t n = argc > 2 ? strtoul(argv[2], 0, 10) : 8;
  char *before = malloc(n), *p = malloc(n);
  sink = before; sink = p;
  memset(p, 'a', n);
  if (!strcmp(what, "overflow-1")) memset(p, 'A', n + 1);
  else if (!strcmp(what, "overflow-32")) memset(p, 'A', n + 32);
  else if (!strcmp(what, "overflow-block")) memset(p, 'A', 2 * n);
  else if (!strcmp(what, "underflow-1")) p[-1] = 'A';
  else if (!strcmp(what, "underflow-32")) memset(p - 32, 'A', 32);
  else if (!strcmp(what, "overflow-realloc")) { p[n] = 0; p = realloc(p, 2 * n); }
  else if (strcmp(what, "clean")) { printf("unknown case %s\n", what); return 2; }
  free(p);
  free(before);
  printf("%s\n", what);
  return 0;
}
