/* C and glibc semantics of the malloc family, checked under LD_PRELOAD. Prints OK. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *__libc_malloc(size_t);
void __libc_free(void *);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);

#define CHECK(c) do { if (!(c)) { printf("FAIL line %d: %s\n", __LINE__, #c); return 1; } } while (0)

int main(void) {
  /* the interposed malloc is ours */
  Dl_info info;
  CHECK(dladdr((void *)malloc, &info) && strstr(info.dli_fname, "retype_malloc_preload"));

  free(NULL);
  void *p = realloc(NULL, 100);
  CHECK(p && ((uintptr_t)p & 15) == 0);
  errno = 0;
  CHECK(realloc(p, 0) == NULL);

  errno = 0;
  CHECK(calloc(SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
  errno = 0;
  CHECK(malloc(SIZE_MAX - 100) == NULL && errno == ENOMEM);
  errno = 0;
  CHECK(reallocarray(NULL, SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);

  /* posix_memalign: EINVAL, errno untouched */
  void *q = (void *)1;
  errno = 1234;
  CHECK(posix_memalign(&q, 3, 10) == EINVAL && q == (void *)1 && errno == 1234);
  CHECK(posix_memalign(&q, 4, 10) == EINVAL);
  CHECK(posix_memalign(&q, 0, 10) == EINVAL);
  errno = 0;
  CHECK(aligned_alloc(24, 48) == NULL && errno == EINVAL);
  p = memalign(24, 10); /* rounded up to 32, like glibc */
  CHECK(p && ((uintptr_t)p & 31) == 0);
  free(p);

  for (size_t align = 8; align <= ((size_t)8 << 20); align *= 2) {
    for (size_t size = 0; size < 3 * align && size < 300000; size += align / 2 + 7) {
      CHECK(posix_memalign(&q, align, size) == 0);
      CHECK(((uintptr_t)q & (align - 1)) == 0);
      size_t u = malloc_usable_size(q);
      CHECK(u >= size);
      memset(q, 0xAB, u);
      void *r = aligned_alloc(align, size + 1);
      CHECK(r && ((uintptr_t)r & (align - 1)) == 0);
      free(q);
      free(r);
    }
  }
  p = valloc(100);
  CHECK(p && ((uintptr_t)p & 4095) == 0);
  free(p);
  p = pvalloc(0);
  CHECK(p && ((uintptr_t)p & 4095) == 0 && malloc_usable_size(p) >= 4096);
  free(p);

  /* usable size is exact: writing all of it never touches a neighbour */
  enum { N = 2000 };
  static unsigned char *blk[N];
  static size_t sz[N];
  for (int i = 0; i < N; i++) {
    size_t n = (size_t)(i * 37) % 3000 + (i % 50 == 0 ? 200000 : 0);
    blk[i] = malloc(n);
    CHECK(blk[i]);
    sz[i] = malloc_usable_size(blk[i]);
    CHECK(sz[i] >= n);
    memset(blk[i], i & 255, sz[i]);
  }
  for (int i = 0; i < N; i++)
    for (size_t k = 0; k < sz[i]; k++) CHECK(blk[i][k] == (i & 255));
  /* realloc keeps contents */
  for (int i = 0; i < N; i++) {
    size_t keep = sz[i] < 64 ? sz[i] : 64;
    unsigned char *r = realloc(blk[i], sz[i] * 3 + 1);
    CHECK(r);
    for (size_t k = 0; k < keep; k++) CHECK(r[k] == (i & 255));
    r = realloc(r, 10);
    for (size_t k = 0; k < 10 && k < keep; k++) CHECK(r[k] == (i & 255));
    free(r);
  }
  /* calloc zeroes reused memory */
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 200; i++) { blk[i] = malloc(256 + i); memset(blk[i], 0xFF, 256 + i); }
    for (int i = 0; i < 200; i++) free(blk[i]);
    for (int i = 0; i < 200; i++) {
      unsigned char *c = calloc(1, 256 + i);
      for (int k = 0; k < 256 + i; k++) CHECK(c[k] == 0);
      blk[i] = c;
    }
    for (int i = 0; i < 200; i++) free(blk[i]);
    unsigned char *big = malloc(1 << 20); memset(big, 0xFF, 1 << 20); free(big);
    big = calloc(1, 1 << 20);
    for (int k = 0; k < (1 << 20); k++) CHECK(big[k] == 0);
    free(big);
  }

  /* __libc_* aliases share the allocator */
  p = __libc_malloc(40); CHECK(p); free(p);
  p = malloc(40); __libc_free(p);
  p = __libc_calloc(4, 4); CHECK(p && ((int *)p)[3] == 0);
  p = __libc_realloc(p, 4000); CHECK(p); free(p);
  p = __libc_memalign(256, 3); CHECK(p && ((uintptr_t)p & 255) == 0); free(p);

  /* the harmless extras */
  CHECK(mallopt(M_ARENA_MAX, 1) == 1);
  malloc_trim(0);
  struct mallinfo2 mi = mallinfo2();
  (void)mi;
  printf("OK\n");
  return 0;
}
