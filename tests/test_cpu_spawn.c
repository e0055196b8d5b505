/* test_cpu_spawn.c: re-runs the current test program with BERT8_MAX_ISA set, so that the
 * once-only CPU table can be tested under every cap without a reset hook in the library. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs /proc/self/exe child_arg with BERT8_MAX_ISA=isa (unset when NULL); returns its exit
 * code, or -1 when it could not run or died from a signal. */
int tcpu_spawn_with_cap(const char *isa, const char *child_arg) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (isa) setenv("BERT8_MAX_ISA", isa, 1);
        else unsetenv("BERT8_MAX_ISA");
        char *argv[] = {(char *)"child", (char *)child_arg, NULL};
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid) return -1;
    if (!WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}
