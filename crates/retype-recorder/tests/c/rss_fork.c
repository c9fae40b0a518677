/* A program that maps memory, forks a child that maps its own, and execs
 * itself, for the tests of RSS samples and mapping calls across fork and
 * exec. Each image (the first, the child, the exec'd one) allocates a heap
 * block and maps, touches and unmaps 1 MiB; the parent keeps its mapping
 * until the child is done, so the child's lies elsewhere. The child prints
 * `child mmap ADDR` (hex). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1024 * 1024)

/* Blocks kept here, so the compiler cannot drop a malloc and its free. */
static char *volatile block;

static char *touched_map(void) {
    char *m = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        exit(2);
    memset(m, 1, MIB);
    return m;
}

int main(int argc, char **argv) {
    block = malloc(1000);
    char *m = touched_map();
    if (argc > 1) {
        /* The exec'd image. */
        munmap(m, MIB);
        free(block);
        return 0;
    }
    pid_t pid = fork();
    if (pid == 0) {
        char *c = touched_map();
        printf("child mmap %lx\n", (unsigned long)c);
        munmap(c, MIB);
        block = malloc(2000);
        free(block);
        exit(0);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
        return 3;
    munmap(m, MIB);
    free(block);
    fflush(stdout);
    execl("/proc/self/exe", argv[0], "image2", (char *)NULL);
    return 4;
}
