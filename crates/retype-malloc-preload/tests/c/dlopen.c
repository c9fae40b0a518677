/* Loads the library with dlopen (not preloaded) and uses its malloc family from several
 * threads: the library must work without static TLS and without being the process malloc.
 * usage: dlopen PATH_TO_SO. Prints OK. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
static void *(*my_malloc)(size_t);
static void (*my_free)(void *);
static size_t (*my_usable)(void *);
static void *run(void *arg) {
  (void)arg;
  for (int i = 0; i < 100000; i++) {
    char *p = my_malloc(i % 3000 + 1);
    if (!p || my_usable(p) < (size_t)(i % 3000 + 1)) return (void *)1;
    memset(p, 7, i % 3000 + 1);
    my_free(p);
  }
  return 0;
}
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { printf("FAIL %s\n", dlerror()); return 1; }
  my_malloc = dlsym(h, "malloc"); my_free = dlsym(h, "free"); my_usable = dlsym(h, "malloc_usable_size");
  pthread_t t[4]; void *r; int bad = 0;
  for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, run, 0);
  for (int i = 0; i < 4; i++) { pthread_join(t[i], &r); bad |= r != 0; }
  printf(bad ? "FAIL\n" : "OK\n");
  return bad;
}
