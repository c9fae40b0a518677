/* Commits one allocation error chosen by argv[1] on a block of argv[2] bytes (default 48),
 * for the hardened-mode tests. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void *free_it(void *p) { free(p); return 0; }
/* Keeps the compiler from pairing up and removing malloc/free calls. */
void *volatile sink;
int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "";
  size_t size = argc > 2 ? strtoul(argv[2], 0, 10) : 48;
  char *p = malloc(size);
  _Alignas(16) char on_stack[64];
  sink = p;
  if (!strcmp(what, "double")) { free(p); free(p); }
  else if (!strcmp(what, "double-remote")) { pthread_t t; free(p); pthread_create(&t, 0, free_it, p); pthread_join(t, 0); }
  else if (!strcmp(what, "interior")) free(p + (size < 32 ? 8 : size / 2));
  else if (!strcmp(what, "stack")) free(on_stack);
  else if (!strcmp(what, "realloc-freed")) { free(p); p = realloc(p, 100); }
  else { free(p); printf("clean\n"); }
  return 0;
}
