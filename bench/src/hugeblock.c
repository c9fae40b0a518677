/* One large block walked as an array (seed 004's memory-access case): malloc MIB MiB, touch
 * every 4 KiB page, then read AnonHugePages and Rss from /proc/self/smaps_rollup.
 * Usage: hugeblock MIB
 * Prints "block_kib=... anon_huge_kib=... rss_kib=... huge_share=... aligned_2mib=0|1". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long rollup(const char *key) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, key, strlen(key))) v = atol(line + strlen(key));
  if (f) fclose(f);
  return v;
}

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: hugeblock MIB\n"); return 2; }
  size_t len = (size_t)atol(argv[1]) << 20;
  char *p = malloc(len);
  if (!p) { perror("malloc"); return 1; }
  for (size_t i = 0; i < len; i += 4096) p[i] = (char)i;
  long huge = rollup("AnonHugePages:"), rss = rollup("Rss:");
  printf("block_kib=%zu anon_huge_kib=%ld rss_kib=%ld huge_share=%.3f aligned_2mib=%d\n",
         len >> 10, huge, rss, (double)huge / (double)(len >> 10),
         ((uintptr_t)p & ((2u << 20) - 1)) == 0);
  free(p);
  return 0;
}
