/* paced: a burst of back-to-back malloc/free pairs, then pairs PACE_US apart,
 * for the recorder's test of an aggregate recording's snapshot and RSS
 * intervals (a thread that slows down all at once must still be checked
 * within about an interval). Usage: paced BURST_PAIRS SLOW_PAIRS PACE_US */
#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>

static void *volatile sink;

static void pair(void) {
  sink = malloc(64);
  free(sink);
}

int main(int argc, char **argv) {
  if (argc != 4) return 2;
  long burst = atol(argv[1]), slow = atol(argv[2]), pace_us = atol(argv[3]);
  sink = malloc(1000); /* live to the end */
  for (long i = 0; i < burst; i++) pair();
  for (long i = 0; i < slow; i++) {
    struct timespec t = {0, pace_us * 1000};
    while (nanosleep(&t, &t) != 0) {}
    pair();
  }
  return 0;
}
