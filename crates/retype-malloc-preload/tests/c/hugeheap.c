/* Builds a 64 MiB heap of 64-byte objects and prints the AnonHugePages share of it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
  long n = (64L << 20) / 64;
  char **v = malloc(n * sizeof(char *));
  for (long i = 0; i < n; i++) { v[i] = malloc(64); v[i][0] = 1; }
  FILE *f = fopen("/proc/self/smaps_rollup", "r"); char line[256]; long huge = -1;
  while (f && fgets(line, sizeof line, f)) if (!strncmp(line, "AnonHugePages:", 14)) huge = atol(line + 14);
  printf("%ld\n", huge);
  return 0;
}
