/* What a recorded program may do to its recording. Usage: faults MODE N [FILE]
 * Every mode makes N marker allocations (size 12345, each freed at once) and
 * prints "line I" for the I-th on stdout, then:
 *   exit       returns 0
 *   segv       writes through a null pointer (SIGSEGV)
 *   abort      calls abort() (SIGABRT)
 *   doublefree frees a block twice: glibc aborts inside free, that is inside
 *              the recorder's hook
 *   kill       prints "ready PID" and waits to be killed (SIGKILL, which no
 *              handler sees)
 *   fsize      returns 0; RLIMIT_FSIZE was set to 512 KiB before the
 *              markers, so the trace outgrows it while the program runs
 *   closeall   closes every descriptor from 0 to 1023, then opens FILE again
 *              and again until it holds every number up to 1023 (or the
 *              numbers run out), so that any descriptor the recorder had now
 *              names FILE; writes "fd K" through each descriptor K, makes N
 *              more marker allocations and returns 0
 *   closefrom3 the same, keeping descriptors 0, 1 and 2 open
 *   forkexec   forks a child that makes N marker allocations and execs
 *              `faults exit N`; waits for it and returns its status
 * Core dumps are off: a fault leaves no core file behind. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define MARKER 12345

static void markers(int n, int print) {
    for (int i = 0; i < n; i++) {
        char *volatile p = malloc(MARKER);
        p[0] = 1;
        free(p);
        if (print) printf("line %d\n", i);
    }
}

/* Closes descriptors FIRST to 1023 and fills them with FILE, without a
 * malloc call in between (the recorder next writes once they all name FILE). */
static void reopen_all(int first, const char *file) {
    fflush(stdout);
    for (int fd = first; fd < 1024; fd++) close(fd);
    int fd = -1;
    do {
        fd = open(file, O_WRONLY | O_CREAT | O_APPEND, 0644);
        char line[32];
        int len = snprintf(line, sizeof line, "fd %d\n", fd);
        if (fd >= 0 && write(fd, line, len) != len) exit(3);
    } while (fd >= 0 && fd < 1023);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: faults MODE N [FILE]\n"); return 2; }
    const char *mode = argv[1];
    int n = atoi(argv[2]);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    if (!strcmp(mode, "fsize")) {
        struct rlimit small = {512 * 1024, RLIM_INFINITY};
        setrlimit(RLIMIT_FSIZE, &small);
    }
    markers(n, 1);
    fflush(stdout);
    if (!strcmp(mode, "exit") || !strcmp(mode, "fsize")) return 0;
    if (!strcmp(mode, "segv")) *(volatile int *)0 = 1;
    if (!strcmp(mode, "abort")) abort();
    if (!strcmp(mode, "doublefree")) {
        char *volatile p = malloc(64);
        free(p);
        free(p);
    }
    if (!strcmp(mode, "kill")) {
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        for (;;) pause();
    }
    if ((!strcmp(mode, "closeall") || !strcmp(mode, "closefrom3")) && argc == 4) {
        reopen_all(!strcmp(mode, "closeall") ? 0 : 3, argv[3]);
        markers(n, 0);
        return 0;
    }
    if (!strcmp(mode, "forkexec")) {
        pid_t pid = fork();
        if (pid == 0) {
            markers(n, 0);
            execl(argv[0], argv[0], "exit", argv[2], (char *)NULL);
            _exit(127);
        }
        int status;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    return 2;
}
