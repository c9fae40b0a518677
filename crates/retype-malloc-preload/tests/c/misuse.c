/* Commits one allocation error chosen by argv[1], for the hardened-mode tests. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void *free_it(void *p) { free(p); return 0; }
/* Keeps the compiler from pairing up and removing malloc/free calls. */
void *volatile sink;
int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "";
  char *p = malloc(48), *big = malloc(1 << 20);
  _Alignas(16) char on_stack[64];
  sink = p; sink = big;
  if (!strcmp(what, "double")) { free(p); free(p); }
  else if (!strcmp(what, "double-large")) { free(big); free(big); }
  else if (!strcmp(what, "double-remote")) { pthread_t t; free(p); pthread_create(&t, 0, free_it, p); pthread_join(t, 0); }
  else if (!strcmp(what, "interior")) free(p + 16);
  else if (!strcmp(what, "stack")) free(on_stack);
  else if (!strcmp(what, "realloc-freed")) { free(p); p = realloc(p, 100); }
  else { free(p); free(big); printf("clean\n"); }
  return 0;
}
