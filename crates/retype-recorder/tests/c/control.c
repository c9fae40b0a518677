/* A tiny interpreter of allocation commands read from stdin, one a line,
 * each answered by "ok" on stdout once done, so that a test can drive a
 * program step by step while recording is started and stopped:
 *   alloc SIZE COUNT   malloc COUNT blocks of SIZE bytes, kept
 *   free SIZE          free every kept block of SIZE bytes
 *   toggle             raise SIGUSR2 (the recorder's toggle signal)
 *   quit               exit(0)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BLOCKS 100000

static void *blocks[MAX_BLOCKS];
static size_t sizes[MAX_BLOCKS];
static int kept;

int main(void) {
    char line[128];
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        size_t size = 0, count = 0;
        if (sscanf(line, "alloc %zu %zu", &size, &count) == 2) {
            for (size_t i = 0; i < count && kept < MAX_BLOCKS; i++) {
                sizes[kept] = size;
                blocks[kept++] = malloc(size);
            }
        } else if (sscanf(line, "free %zu", &size) == 1) {
            for (int i = 0; i < kept; i++) {
                if (blocks[i] && sizes[i] == size) {
                    free(blocks[i]);
                    blocks[i] = NULL;
                }
            }
        } else if (strncmp(line, "toggle", 6) == 0) {
            raise(SIGUSR2);
        } else if (strncmp(line, "quit", 4) == 0) {
            printf("ok\n");
            exit(0);
        } else {
            fprintf(stderr, "control: unknown command %s", line);
            return 2;
        }
        printf("ok\n");
    }
    return 0;
}
