/* hold_open.c: an LD_PRELOAD shim for the server tests. While the file named by
 * BERT8_HOLD_OPEN_UNTIL exists, opening any path that ends in "/config.json" waits, so a test can
 * observe the server while its model is still loading (a FIFO no longer does: the loaders refuse
 * non-regular files). Built only without sanitizers (their runtimes must be preloaded first). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <stdlib.h>

static void hold(const char *path) {
    const char *until = getenv("BERT8_HOLD_OPEN_UNTIL");
    size_t n = path ? strlen(path) : 0;
    if (!until || n < 12 || strcmp(path + n - 12, "/config.json") != 0) return;
    struct stat sb;
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 6000 && stat(until, &sb) == 0; i++) nanosleep(&ts, NULL); /* at most 60 s */
}

typedef int (*open_fn)(const char *, int, ...);

static int forward(const char *name, const char *path, int flags, va_list ap) {
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
    hold(path);
    open_fn real = (open_fn)dlsym(RTLD_NEXT, name);
    return real(path, flags, mode);
}

int open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    int fd = forward("open", path, flags, ap);
    va_end(ap);
    return fd;
}

int open64(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    int fd = forward("open64", path, flags, ap);
    va_end(ap);
    return fd;
}
