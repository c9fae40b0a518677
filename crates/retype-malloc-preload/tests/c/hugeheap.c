/* Builds a heap of MIB MiB of 64-byte objects. Usage: hugeheap MIB
 * Prints "advised_kib huge_kib": the KiB of mappings that asked for transparent huge pages
 * (MADV_HUGEPAGE: VmFlags "hg" in /proc/self/smaps), which is what the allocator decides,
 * and the KiB the kernel backed with huge pages (AnonHugePages), which also depends on the
 * THP mode and on how fragmented the machine's memory is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: hugeheap MIB\n"); return 2; }
  long n = (atol(argv[1]) << 20) / 64;
  char **v = malloc(n * sizeof(char *));
  for (long i = 0; i < n; i++) { v[i] = malloc(64); v[i][0] = 1; }
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[512];
  long size = 0, advised = 0, huge = 0;
  while (f && fgets(line, sizeof line, f)) {
    if (!strncmp(line, "Size:", 5)) size = atol(line + 5);
    else if (!strncmp(line, "AnonHugePages:", 14)) huge += atol(line + 14);
    else if (!strncmp(line, "VmFlags:", 8) && strstr(line, " hg")) advised += size;
  }
  printf("%ld %ld\n", advised, huge);
  return 0;
}
