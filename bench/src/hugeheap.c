/* hugeheap: builds a heap of MIB mebibytes of 64-byte objects, then reports how much of the
 * process's memory the kernel backs with transparent huge pages (AnonHugePages in
 * /proc/self/smaps_rollup) against the heap size.
 * usage: hugeheap MIB */
#include "common.h"
static long field(const char *name) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r"); char line[256]; long v = -1;
  if (!f) return -1;
  while (fgets(line, sizeof line, f)) if (strncmp(line, name, strlen(name)) == 0) v = atol(line + strlen(name));
  fclose(f);
  return v;
}
int main(int argc, char **argv) {
  long mib = argc > 1 ? atol(argv[1]) : 128;
  long n = (mib << 20) / 64;
  char **v = xmalloc(n * sizeof(char *));
  double t0 = now_s();
  for (long i = 0; i < n; i++) { v[i] = xmalloc(64); v[i][0] = 1; }
  long huge = field("AnonHugePages:"), rss = field("Rss:");
  printf("heap_kib=%ld anon_huge_kib=%ld rss_kib=%ld huge_share=%.3f\n", mib << 10, huge, rss, (double)huge / (mib << 10));
  report((double)n, now_s() - t0);
  for (long i = 0; i < n; i++) free(v[i]);
  free(v);
  return 0;
}
