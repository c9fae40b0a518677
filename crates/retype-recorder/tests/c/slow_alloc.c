/* slow_alloc: a malloc library for the recorder's tests. Each malloc of SLOW_SIZE bytes
 * sleeps 2 ms first, so the thread is surely descheduled inside that call; every call is
 * then glibc's own.
 * Build: cc -shared -fPIC -o libslow_alloc.so slow_alloc.c */
#define _GNU_SOURCE
#include <stddef.h>
#include <time.h>

#define SLOW_SIZE 12345

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

void *malloc(size_t n) {
  if (n == SLOW_SIZE) {
    struct timespec t = {0, 2000000};
    while (nanosleep(&t, &t) != 0) {}
  }
  return __libc_malloc(n);
}
void *calloc(size_t n, size_t size) { return __libc_calloc(n, size); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
