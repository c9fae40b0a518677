/* mallinfo2, mallinfo and malloc_info after four threads each left 1000 blocks of one
 * size (100, 200, 300, 400 bytes) live and one large block of 3 MiB was made: prints the
 * fields before and after, then the XML, for tests/preload.rs to check against each other
 * and against the statistics at exit (RETYPE_MALLOC_STATS). The blocks stay live. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define BLOCKS 1000

static void *live[THREADS][BLOCKS];

static void *work(void *arg) {
    long t = (long)arg;
    for (int i = 0; i < BLOCKS; i++) {
        live[t][i] = malloc(100 * (t + 1));
        if (!live[t][i])
            abort();
    }
    return NULL;
}

static void fields(const char *when, struct mallinfo2 m) {
    printf("%s arena %zu ordblks %zu smblks %zu hblks %zu hblkhd %zu usmblks %zu fsmblks %zu "
           "uordblks %zu fordblks %zu keepcost %zu\n",
           when, m.arena, m.ordblks, m.smblks, m.hblks, m.hblkhd, m.usmblks, m.fsmblks,
           m.uordblks, m.fordblks, m.keepcost);
}

int main(void) {
    printf("mallinfo\n"); /* stdout's buffer is allocated before anything is measured */
    struct mallinfo2 before = mallinfo2();
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, work, (void *)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    char *big = malloc(3 << 20);
    memset(big, 1, 4096);
    struct mallinfo2 after = mallinfo2();
    struct mallinfo small = mallinfo();
    fields("before", before);
    fields("after", after);
    printf("int arena %d uordblks %d hblkhd %d\n", small.arena, small.uordblks, small.hblkhd);
    if (malloc_info(1, stdout) != EINVAL)
        return 1;
    malloc_info(0, stdout);
    printf("OK\n");
    return 0;
}
