/* Ends a process in each way the recorder must survive. Usage: lifecycle MODE N
 * Every mode first makes N allocations of the marker size 12345 (and frees them).
 *   exit     return from main
 *   _exit    _exit(3)
 *   sigterm  raise(SIGTERM)
 *   abort    abort()
 *   fork     the child makes N more marker allocations and calls _exit(0);
 *            the parent waits for it
 *   exec     exec /bin/true: the new image goes on in the same trace
 *   execl, execlp, execle   the same through the C-variadic exec functions
 *   busy     two threads allocate without pause while main returns: the
 *            trace is written out while they append */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MARKER 12345

static void marker_allocations(int n) {
    for (int i = 0; i < n; i++) {
        char *volatile p = malloc(MARKER);
        p[0] = 1;
        free(p);
    }
}

/* Workers that have made their first allocation: main returns only once both
 * are allocating, however slowly this machine schedules them. */
static _Atomic int allocating;

static void *allocate_forever(void *arg) {
    (void)arg;
    for (int first = 1;; first = 0) {
        char *volatile p = malloc(64);
        p[0] = 1;
        free(p);
        if (first) allocating++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: lifecycle MODE N\n"); return 2; }
    const char *mode = argv[1];
    int n = atoi(argv[2]);
    marker_allocations(n);
    if (!strcmp(mode, "exit")) return 0;
    if (!strcmp(mode, "busy")) {
        pthread_t t;
        for (int i = 0; i < 2; i++) pthread_create(&t, NULL, allocate_forever, NULL);
        while (allocating < 2) usleep(1000);
        return 0;
    }
    if (!strcmp(mode, "_exit")) _exit(3);
    if (!strcmp(mode, "sigterm")) raise(SIGTERM);
    if (!strcmp(mode, "abort")) abort();
    if (!strcmp(mode, "fork")) {
        pid_t pid = fork();
        if (pid == 0) { marker_allocations(n); _exit(0); }
        int status;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    if (!strcmp(mode, "exec")) {
        char *args[] = {"true", NULL};
        execv("/bin/true", args);
        return 1;
    }
    if (!strcmp(mode, "execl")) { execl("/bin/true", "true", "x", (char *)NULL); return 1; }
    if (!strcmp(mode, "execlp")) { execlp("true", "true", "x", (char *)NULL); return 1; }
    /* The environment, passed on, keeps the recorder in the new image. */
    if (!strcmp(mode, "execle")) { execle("/bin/true", "true", "x", (char *)NULL, environ); return 1; }
    return 2;
}
