/* A deterministic program for the bounded recordings' tests (aggregate and
 * sampled), making about CALLS malloc-family calls (its first argument,
 * default 100,000) from known sites, without stdio:
 *
 *   churn:   malloc(16..79) and its free at once (temporaries), 3/5 of the calls;
 *   grow:    a list that grows to 2,000 blocks of 1,000 bytes, then loses every
 *            other one, each round (CALLS / 10,000 rounds, at least 1);
 *   resize:  realloc of one block up and down (a move, a free, an allocation);
 *   peak:    64 blocks of 4,096 bytes live at once, once, in the middle (the
 *            process peaks in grow, with its 2,000 blocks live);
 *   leak:    10 blocks of 100 bytes never freed.
 *
 * With a second argument `big`, it allocates about 1 GB instead, from three
 * sites of different block sizes, every block freed at once (the sampled
 * recording's estimates are checked on it):
 *
 *   huge:  512 blocks of 1 MiB   (512 MiB)
 *   mid:   65,536 of 4 KiB       (256 MiB)
 *   tiny:  1,048,576 of 256 B    (256 MiB)
 *
 * With a second argument `threads`, THREADS threads (its third argument,
 * default 4) each run `worker`: churn of CALLS / THREADS / 2 pairs, and
 * 200 blocks of 100 bytes kept, half freed by the worker and half handed to
 * the main thread, which frees them after joining every worker (frees of
 * blocks another thread allocated); then `peak` and `leak` in the main
 * thread alone, so that the process peaks at a moment no other thread is
 * running (its figures do not depend on how the threads interleaved).
 *
 * With a second argument `handoff`: churn, then a thread runs `peak` and,
 * still alive, hands over to the main thread (a semaphore), which runs
 * `below`, 48 blocks of 4,096 bytes: the process's peak stays the thread's,
 * though the main thread's blocks and the thread's freed ones add up to
 * more (the aggregate recording defers a thread's frees). Then `leak`.
 *
 * With a second argument `regain`: churn, then a thread allocates and frees
 * 32 blocks of 4,096 bytes and, still alive, hands over to the main thread,
 * which keeps 48 such blocks live while the thread allocates its 32 again:
 * the process peaks then, at 80 blocks, though the thread's new blocks are
 * no more than the frees it deferred (which the aggregate recording holds
 * such rises against only while the live bytes are not above the peak).
 * Then `leak`. */
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

static void *volatile sink;

NOINLINE static void churn(long n) {
    for (long i = 0; i < n; i++) {
        void *p = malloc(16 + (size_t)(i % 64));
        sink = p;
        free(p);
    }
}

NOINLINE static void grow(void) {
    static void *list[2000];
    for (int i = 0; i < 2000; i++)
        list[i] = malloc(1000);
    for (int i = 0; i < 2000; i += 2)
        free(list[i]);
    for (int i = 1; i < 2000; i += 2)
        free(list[i]);
}

NOINLINE static void resize(void) {
    void *p = malloc(10);
    for (int i = 0; i < 100; i++)
        p = realloc(p, (size_t)(i % 2 ? 64 : 50000));
    free(p);
}

NOINLINE static void peak(void) {
    void *b[64];
    for (int i = 0; i < 64; i++)
        b[i] = malloc(4096);
    for (int i = 0; i < 64; i++)
        free(b[i]);
}

NOINLINE static void below(void) {
    void *b[48];
    for (int i = 0; i < 48; i++)
        b[i] = malloc(4096);
    for (int i = 0; i < 48; i++)
        free(b[i]);
}

NOINLINE static void leak(void) {
    for (int i = 0; i < 10; i++)
        sink = malloc(100);
}

NOINLINE static void huge(void) {
    for (int i = 0; i < 512; i++) {
        char *p = malloc(1 << 20);
        p[0] = 1;
        sink = p;
        free(p);
    }
}

NOINLINE static void mid(void) {
    for (int i = 0; i < 65536; i++) {
        sink = malloc(4096);
        free(sink);
    }
}

NOINLINE static void tiny(void) {
    for (int i = 0; i < 1048576; i++) {
        sink = malloc(256);
        free(sink);
    }
}

#define KEPT 200

struct work {
    long pairs;
    void *kept[KEPT];
};

NOINLINE static void *worker(void *arg) {
    struct work *w = arg;
    churn(w->pairs);
    for (int i = 0; i < KEPT; i++)
        w->kept[i] = malloc(100);
    for (int i = 0; i < KEPT; i += 2)
        free(w->kept[i]);
    return NULL;
}

NOINLINE static void threads(long calls, int n) {
    pthread_t t[64];
    static struct work w[64];
    n = n < 1 ? 1 : n > 64 ? 64 : n;
    for (int i = 0; i < n; i++) {
        w[i].pairs = calls / n / 2;
        pthread_create(&t[i], NULL, worker, &w[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < n; i++)
        for (int k = 1; k < KEPT; k += 2)
            free(w[i].kept[k]);
    peak();
    leak();
}

static sem_t peaked, done;

NOINLINE static void *peaker(void *arg) {
    (void)arg;
    peak();
    sem_post(&peaked);
    sem_wait(&done);
    return NULL;
}

NOINLINE static void handoff(long calls) {
    pthread_t t;
    churn(calls);
    sem_init(&peaked, 0, 0);
    sem_init(&done, 0, 0);
    pthread_create(&t, NULL, peaker, NULL);
    sem_wait(&peaked);
    below();
    sem_post(&done);
    pthread_join(t, NULL);
    leak();
}

static sem_t freed, kept, regained;

NOINLINE static void *regainer(void *arg) {
    void *b[32];
    (void)arg;
    for (int i = 0; i < 32; i++)
        b[i] = malloc(4096);
    for (int i = 0; i < 32; i++)
        free(b[i]);
    sem_post(&freed);
    sem_wait(&kept);
    for (int i = 0; i < 32; i++)
        b[i] = malloc(4096);
    for (int i = 0; i < 32; i++)
        free(b[i]);
    sem_post(&regained);
    return NULL;
}

NOINLINE static void regain(long calls) {
    pthread_t t;
    void *b[48];
    churn(calls);
    sem_init(&freed, 0, 0);
    sem_init(&kept, 0, 0);
    sem_init(&regained, 0, 0);
    pthread_create(&t, NULL, regainer, NULL);
    sem_wait(&freed);
    for (int i = 0; i < 48; i++)
        b[i] = malloc(4096);
    sem_post(&kept);
    sem_wait(&regained);
    for (int i = 0; i < 48; i++)
        free(b[i]);
    pthread_join(t, NULL);
    leak();
}

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[2], "big") == 0) {
        huge();
        mid();
        tiny();
        return 0;
    }
    long calls = argc > 1 ? atol(argv[1]) : 100000;
    if (argc > 2 && strcmp(argv[2], "threads") == 0) {
        threads(calls, argc > 3 ? atoi(argv[3]) : 4);
        return 0;
    }
    if (argc > 2 && strcmp(argv[2], "handoff") == 0) {
        handoff(calls);
        return 0;
    }
    if (argc > 2 && strcmp(argv[2], "regain") == 0) {
        regain(calls);
        return 0;
    }
    long rounds = calls / 10000 > 0 ? calls / 10000 : 1;
    for (long r = 0; r < rounds; r++) {
        grow();
        resize();
        if (r == rounds / 2)
            peak();
    }
    churn(calls * 3 / 10);
    leak();
    return 0;
}
