/* slow_calls: five mallocs of 12345 bytes (which slow_alloc.c makes sleep), each followed
 * by 200 quick malloc/free pairs of 16 bytes. The blocks go through a volatile pointer so
 * that the compiler keeps every call. */
#include <stdlib.h>

static void *volatile sink;

int main(void) {
  for (int i = 0; i < 5; i++) {
    void *slow = sink = malloc(12345);
    for (int j = 0; j < 200; j++) {
      sink = malloc(16);
      free(sink);
    }
    free(slow);
  }
  return 0;
}
