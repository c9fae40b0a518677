/* The least a fill-and-check quarantine can cost on churn's pattern, with no allocator in
 * the way (docs/benchmarks.md, "Hardened mode"): a pool of blocks stands for the heap; each
 * pair frees a random one of 4096 live blocks (8..MAXSIZE bytes, first byte touched) and
 * takes a block from a LIFO free list, as a fast path does. With a quarantine, the freed
 * block's bytes are first filled with one junk byte (memset) and wait, oldest first, while
 * the quarantine holds more than QUARANTINE bytes; the oldest is checked (memcmp of the
 * block against itself shifted by one) and becomes free. Prints ns per pair both ways.
 * usage: quarantine-floor [MAXSIZE [MILLION_PAIRS [QUARANTINE]]]
 * cc -O2 -o quarantine-floor bench/quarantine-floor.c */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define LIVE 4096
#define JUNK 0x91

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t rnd(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
  *s = x;
  return x * 2685821657736338717ULL;
}

/* Runs `pairs` pairs over blocks of `stride` bytes; `quarantine` 0 means none. Returns ns
 * per pair; counts blocks whose junk was found broken (none: nothing writes after free). */
static double run(size_t max, size_t stride, long pairs, size_t quarantine, long *broken) {
  /* Room for the live blocks and for as many as the quarantine can hold (16 bytes or more
   * each); only the blocks ever used are touched. */
  size_t blocks = LIVE + quarantine / 16 + 2;
  unsigned char *pool = mmap(0, stride * blocks, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  int *free_list = malloc(blocks * sizeof(int)), *ring = malloc(blocks * sizeof(int));
  size_t *ring_size = malloc(blocks * sizeof(size_t));
  int slot[LIVE], nfree = 0;
  size_t head = 0, len = 0, bytes = 0;
  if (pool == MAP_FAILED || !free_list || !ring || !ring_size) { fprintf(stderr, "out of memory\n"); exit(1); }
  for (int k = 0; k < LIVE; k++) slot[k] = k;
  for (size_t b = blocks; b-- > LIVE;) free_list[nfree++] = (int)b;
  uint64_t s = 0x9E3779B97F4A7C15ULL;
  double t0 = now_s();
  for (long i = 0; i < pairs; i++) {
    uint64_t r = rnd(&s);
    unsigned k = r & (LIVE - 1);
    size_t n = (8 + (r >> 32) % (max - 7) + 15) & ~(size_t)15;
    int b = slot[k];
    if (!quarantine) {
      free_list[nfree++] = b;
    } else {
      memset(pool + (size_t)b * stride, JUNK, n);
      ring[(head + len) % blocks] = b;
      ring_size[(head + len) % blocks] = n;
      len++;
      bytes += n;
      while (bytes > quarantine) {
        unsigned char *q = pool + (size_t)ring[head] * stride;
        *broken += !(q[0] == JUNK && !memcmp(q, q + 1, ring_size[head] - 1));
        bytes -= ring_size[head];
        free_list[nfree++] = ring[head];
        head = (head + 1) % blocks;
        len--;
      }
    }
    slot[k] = free_list[--nfree];
    pool[(size_t)slot[k] * stride] = (unsigned char)i;
  }
  double ns = (now_s() - t0) / pairs * 1e9;
  munmap(pool, stride * blocks); free(free_list); free(ring); free(ring_size);
  return ns;
}

int main(int argc, char **argv) {
  size_t max = argc > 1 ? strtoul(argv[1], 0, 10) : 1024;
  long pairs = (long)((argc > 2 ? atof(argv[2]) : 10) * 1e6);
  size_t quarantine = argc > 3 ? strtoul(argv[3], 0, 10) : 1 << 20;
  if (max < 8 || pairs < 1 || quarantine < 1) { fprintf(stderr, "usage: quarantine-floor [MAXSIZE>=8 [MILLION_PAIRS [QUARANTINE>=1]]]\n"); return 2; }
  size_t stride = (max + 15 + 63) & ~(size_t)63;
  long broken = 0;
  double without = run(max, stride, pairs, 0, &broken);
  double with = run(max, stride, pairs, quarantine, &broken);
  printf("blocks 8..%zu B, quarantine %zu B: %.1f ns a pair without, %.1f with (+%.1f)%s\n", max,
         quarantine, without, with, with - without, broken ? " BROKEN JUNK" : "");
  return broken != 0;
}
