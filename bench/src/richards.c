/* richards-like (seed 004 macro): an operating-system task scheduler simulation in the
 * spirit of Richards' benchmark, written from its published description. An idle task
 * releases a worker; the worker creates work packets (heap objects) and queues them to two
 * handlers; handlers pass packets to devices, which consume and free them. Highest-priority
 * ready task runs; a task waiting on an empty queue is held.
 * usage: richards ITERATIONS */
#include "common.h"
typedef struct packet { struct packet *link; int kind, datum; char data[4]; } packet;
enum { IDLE, WORKER, HANDLER_A, HANDLER_B, DEVICE_A, DEVICE_B, NTASKS };
static packet *queue[NTASKS];
static long held_count, queued_count, consumed;
static void enqueue(int task, packet *p) {
  p->link = 0; packet **q = &queue[task];
  while (*q) q = &(*q)->link;
  *q = p; queued_count++;
}
static packet *dequeue(int task) { packet *p = queue[task]; if (p) queue[task] = p->link; return p; }
int main(int argc, char **argv) {
  long iterations = argc > 1 ? atol(argv[1]) : 2000000;
  uint64_t seed = 74755; double t0 = now_s(); int handler = HANDLER_A;
  for (long it = 0; it < iterations; it++) {
    /* idle: release worker or a device, by a pseudo-random bit */
    int release = (rnd(&seed) & 1) ? WORKER : (rnd(&seed) & 1 ? DEVICE_A : DEVICE_B);
    if (release == WORKER) { /* worker: make a packet, alternate handlers */
      packet *p = xmalloc(sizeof(packet)); p->kind = handler; p->datum = 0;
      for (int i = 0; i < 4; i++) p->data[i] = (char)('A' + (it + i) % 26);
      enqueue(handler, p); handler = handler == HANDLER_A ? HANDLER_B : HANDLER_A;
    }
    for (int h = HANDLER_A; h <= HANDLER_B; h++) { /* handlers: forward one packet */
      packet *p = dequeue(h);
      if (!p) { held_count++; continue; }
      p->datum++; enqueue(h == HANDLER_A ? DEVICE_A : DEVICE_B, p);
    }
    if (release != WORKER) { /* device: consume and free one packet */
      packet *p = dequeue(release);
      if (p) { consumed += p->data[0]; free(p); } else held_count++;
    }
  }
  for (int t = 0; t < NTASKS; t++) for (packet *p; (p = dequeue(t));) free(p);
  printf("queued=%ld held=%ld consumed=%ld\n", queued_count, held_count, consumed);
  report((double)queued_count, now_s() - t0);
  return 0;
}
