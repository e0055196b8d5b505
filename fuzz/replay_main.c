/* replay_main.c: a main() for the harnesses outside libFuzzer. It runs LLVMFuzzerTestOneInput
 * (after LLVMFuzzerInitialize, when the harness has one) on every file named on the command
 * line, and on every file inside every folder named, so that the committed seed corpora and
 * the inputs of fixed crashes (fuzz/regressions/) replay in the normal test suite, under the
 * sanitizers in the sanitizer build. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) return 1;
    /* an exact-size copy, as libFuzzer passes it */
    uint8_t *exact = malloc(n ? n : 1);
    if (n) memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int files = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) continue; /* an absent folder (no regressions yet) */
        if (!S_ISDIR(sb.st_mode)) {
            bad += run_file(argv[i]);
            files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) continue;
        char **names = NULL;
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.') continue;
            names = realloc(names, (n + 1) * sizeof *names);
            names[n++] = strdup(de->d_name);
        }
        closedir(d);
        if (n) qsort(names, n, sizeof *names, cmp); /* a fixed order: reproducible runs */
        for (size_t k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], names[k]);
            if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
                bad += run_file(path);
                files++;
            }
            free(names[k]);
        }
        free(names);
    }
    printf("replayed %d inputs\n", files);
    return bad ? 1 : 0;
}
