/* tlb_reach: how far a TLB entry reaches. A pointer chase in random order over LINES cache
 * lines, one every STRIDE bytes, on 2 MiB hugetlb pages (HUGE=1; reserve them first:
 * vm.nr_hugepages) or 4 KiB pages (HUGE=0). At STRIDE 64 the lines are packed (one 2 MiB
 * span); at STRIDE 4160 each line has a 4 KiB page of its own, at a varying offset so the
 * lines spread over the cache's sets. The data is the same either way; only the
 * translations differ: on 2 MiB pages a span of 18 MiB is 9 TLB entries, unless the
 * memory behind them is mapped in smaller pages further down (a hypervisor's).
 * usage: tlb_reach HUGE LINES STRIDE */
#include "common.h"
#include <sys/mman.h>
int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: tlb_reach HUGE LINES STRIDE\n"); return 2; }
  int huge = atoi(argv[1]);
  size_t n = strtoul(argv[2], 0, 0), stride = strtoul(argv[3], 0, 0);
  size_t span = (n * stride + (2 << 20) - 1) & ~(size_t)((2 << 20) - 1);
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | (huge ? MAP_HUGETLB : 0);
  char *m = mmap(0, span, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (m == MAP_FAILED) { perror(huge ? "mmap (2 MiB hugetlb pages reserved?)" : "mmap"); return 1; }
  if (!huge) madvise(m, span, MADV_NOHUGEPAGE);
  size_t *perm = xmalloc(n * sizeof *perm);
  uint64_t s = 7;
  for (size_t i = 0; i < n; i++) perm[i] = i;
  for (size_t i = n - 1; i > 0; i--) {
    size_t j = rnd(&s) % (i + 1), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  for (size_t i = 0; i < n; i++) *(char **)(m + perm[i] * stride) = m + perm[(i + 1) % n] * stride;
  char *p = m;
  for (size_t i = 0; i < n; i++) p = *(char **)p;
  long steps = 20000000;
  double t0 = now_s();
  for (long i = 0; i < steps; i++) p = *(char **)p;
  double t = now_s() - t0;
  printf("%s pages, %zu lines, stride %zu, span %zu MiB: %.2f ns an access (%p)\n",
         huge ? "2M" : "4K", n, stride, span >> 20, t / steps * 1e9, (void *)p);
  return 0;
}
