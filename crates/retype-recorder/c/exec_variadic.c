/* execl, execlp and execle for libretype_recorder.so.
 *
 * They are C-variadic, which stable Rust cannot define, so their bodies live
 * here: each gathers its arguments into an argv array on the stack (no
 * allocation: the recorder never allocates behind the program's back) and
 * calls the recorder's own execve or execvp, which write the trace segment out
 * before the exec, as for the other exec functions. The exported execl,
 * execlp and execle are Rust naked functions (src/process.rs) that jump here
 * with the caller's registers and stack untouched: rustc exports only Rust
 * items from a cdylib. */
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#define HIDDEN __attribute__((visibility("hidden")))

extern char **environ;

/* The number of arguments after `first` up to and including the NULL that ends them. */
static size_t count_args(const char *first, va_list ap) {
    size_t n = 1;
    for (const char *a = first; a != NULL; a = va_arg(ap, const char *)) n++;
    return n;
}

/* Fills argv[0..n) from `first` and `ap`; argv[n - 1] is the NULL. */
static void fill_args(char **argv, size_t n, const char *first, va_list ap) {
    argv[0] = (char *)first;
    for (size_t i = 1; i < n; i++) argv[i] = argv[i - 1] ? va_arg(ap, char *) : NULL;
}

HIDDEN int retype_execl(const char *path, const char *arg, ...) {
    va_list ap, count;
    va_start(ap, arg);
    va_copy(count, ap);
    size_t n = count_args(arg, count);
    va_end(count);
    char *argv[n];
    fill_args(argv, n, arg, ap);
    va_end(ap);
    return execve(path, argv, environ);
}

HIDDEN int retype_execlp(const char *file, const char *arg, ...) {
    va_list ap, count;
    va_start(ap, arg);
    va_copy(count, ap);
    size_t n = count_args(arg, count);
    va_end(count);
    char *argv[n];
    fill_args(argv, n, arg, ap);
    va_end(ap);
    return execvp(file, argv);
}

HIDDEN int retype_execle(const char *path, const char *arg, ...) {
    va_list ap, count;
    va_start(ap, arg);
    va_copy(count, ap);
    size_t n = count_args(arg, count);
    va_end(count);
    char *argv[n];
    fill_args(argv, n, arg, ap);
    /* The environment follows the NULL that ends the arguments. */
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}
