/* test_atomic_dir.c: the crash-safe folder writer (src/io/atomic_dir.h): a new or replaced
 * folder appears whole, an aborted write leaves the old one untouched, temporaries and backups
 * of killed writers are cleaned up (or put back) by the next writer, the source folder and
 * non-model folders are never replaced, and a second writer in the same parent is refused.
 * With the argument `full-disk` it runs the ENOSPC case on a 1 MiB tmpfs instead (it needs
 * root; without permission to mount it exits 77, which ctest reports as skipped). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/atomic_dir.h"
#include "testutil.h"

static char *path2(const char *a, const char *b) {
    static char buf[64][1024];
    static int k;
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s/%s", a, b); /* a or b may be an earlier result */
    char *p = buf[k++ % 64]; /* results stay valid for 63 more calls */
    memcpy(p, tmp, sizeof tmp);
    return p;
}

static bool exists(const char *p) {
    struct stat sb;
    return lstat(p, &sb) == 0;
}

/* The file's whole text, or "" when it cannot be read (static buffer). */
static const char *text_of(const char *p) {
    static char buf[256];
    size_t n = 0;
    char *s = tu_read_file(p, &n);
    snprintf(buf, sizeof buf, "%s", s ? s : "");
    free(s);
    return buf;
}

/* Number of entries of dir whose name starts with prefix. */
static int count_prefix(const char *dir, const char *prefix) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c '^%s' > '%s/count.txt'", dir, prefix,
             tu_tmpdir());
    if (system(cmd) == -1) return -1;
    return atoi(text_of(path2(tu_tmpdir(), "count.txt")));
}

static void make_model(const char *dir, const char *tag) {
    mkdir(dir, 0755);
    CHECK(tu_write_file(path2(dir, "config.json"), tag, strlen(tag)) == 0);
    CHECK(tu_write_file(path2(dir, "model.safetensors"), tag, strlen(tag)) == 0);
}

static bert8_status write_model(const char *dest, const char *source, const char *tag,
                                bool commit, bool no_exchange, b8_err *e) {
    b8_atomic_dir *d = NULL;
    bert8_status st = b8_atomic_dir_begin(dest, source, &d, e);
    if (st) return st;
    if (no_exchange) b8_atomic_dir_no_exchange(d);
    if (!(st = b8_atomic_dir_write_file(d, "config.json", tag, strlen(tag), e)) &&
        !(st = b8_atomic_dir_write_file(d, "model.safetensors", tag, strlen(tag), e)) &&
        !(st = b8_atomic_dir_write_file(d, "1_Pooling/config.json", tag, strlen(tag), e)) &&
        commit)
        st = b8_atomic_dir_commit(d, e);
    b8_atomic_dir_free(d);
    return st;
}

TEST(new_folder_appears_whole) {
    const char *dest = path2(tu_tmpdir(), "fresh");
    b8_err e = {0};
    CHECK(write_model(dest, NULL, "new", true, false, &e) == BERT8_OK);
    CHECK(!strcmp(text_of(path2(dest, "config.json")), "new"));
    CHECK(!strcmp(text_of(path2(dest, "1_Pooling/config.json")), "new"));
    CHECK(count_prefix(tu_tmpdir(), ".fresh.") == 0);
}

TEST(existing_model_is_replaced_by_exchange_and_by_two_renames) {
    for (int fallback = 0; fallback < 2; fallback++) {
        const char *dest = path2(tu_tmpdir(), fallback ? "repl2" : "repl1");
        make_model(dest, "old");
        CHECK(tu_write_file(path2(dest, "stale.txt"), "x", 1) == 0);
        b8_err e = {0};
        CHECK(write_model(dest, NULL, "new", true, fallback, &e) == BERT8_OK);
        CHECKF(!strcmp(text_of(path2(dest, "model.safetensors")), "new"), "%s", e.msg);
        CHECK(!exists(path2(dest, "stale.txt"))); /* replaced as a whole */
        CHECK(count_prefix(tu_tmpdir(), fallback ? ".repl2." : ".repl1.") == 0);
    }
}

TEST(aborted_write_leaves_old_folder_and_no_temporary) {
    const char *dest = path2(tu_tmpdir(), "abort");
    make_model(dest, "old");
    b8_err e = {0};
    CHECK(write_model(dest, NULL, "new", false, false, &e) == BERT8_OK);
    CHECK(!strcmp(text_of(path2(dest, "model.safetensors")), "old"));
    CHECK(count_prefix(tu_tmpdir(), ".abort.") == 0);
}

TEST(stale_temporaries_and_backups_of_killed_writers_are_cleaned_up) {
    /* a killed writer's temporary and a backup beside an existing destination: both deleted */
    const char *dest = path2(tu_tmpdir(), "stale");
    make_model(dest, "old");
    make_model(path2(tu_tmpdir(), ".stale.tmp-99999"), "partial");
    make_model(path2(tu_tmpdir(), ".stale.old-12345"), "older");
    CHECK(tu_write_file(path2(tu_tmpdir(), ".stale.tmp-notapid"), "keep", 4) == 0);
    b8_err e = {0};
    bert8_status st = write_model(dest, NULL, "new", true, false, &e);
    CHECKF(st == BERT8_OK, "%s", e.msg);
    CHECK(!strcmp(text_of(path2(dest, "model.safetensors")), "new"));
    CHECK(!exists(path2(tu_tmpdir(), ".stale.tmp-99999")));
    CHECK(!exists(path2(tu_tmpdir(), ".stale.old-12345")));
    CHECK(exists(path2(tu_tmpdir(), ".stale.tmp-notapid"))); /* not ours: left alone */
    /* a writer killed between its two renames: the destination is missing and its backup
     * holds the old model; the next writer puts it back before anything else */
    const char *dest2 = path2(tu_tmpdir(), "lost");
    make_model(path2(tu_tmpdir(), ".lost.old-4242"), "old");
    make_model(path2(tu_tmpdir(), ".lost.tmp-4242"), "new-complete");
    CHECK(write_model(dest2, NULL, "newer", false, false, &e) == BERT8_OK); /* then aborts */
    CHECK(!strcmp(text_of(path2(dest2, "model.safetensors")), "old"));
    CHECK(count_prefix(tu_tmpdir(), ".lost.") == 0);
}

TEST(source_folder_and_non_model_folders_are_never_replaced) {
    const char *src = path2(tu_tmpdir(), "src");
    make_model(src, "fp32");
    b8_err e = {0};
    CHECK(write_model(src, src, "int8", true, false, &e) == BERT8_ERR_INVALID_ARG);
    CHECK(strstr(e.msg, "source model folder") != NULL);
    char alias[1200];
    snprintf(alias, sizeof alias, "%s/../%s/src/", tu_tmpdir(), strrchr(tu_tmpdir(), '/') + 1);
    CHECK(write_model(alias, src, "int8", true, false, &e) == BERT8_ERR_INVALID_ARG);
    /* the parent of the source */
    const char *outer = path2(tu_tmpdir(), "outer");
    mkdir(outer, 0755);
    CHECK(tu_write_file(path2(outer, "config.json"), "{}", 2) == 0);
    const char *inner = path2(outer, "model");
    make_model(inner, "fp32");
    CHECK(write_model(outer, inner, "int8", true, false, &e) == BERT8_ERR_INVALID_ARG);
    CHECKF(strstr(e.msg, "contains") != NULL, "%s", e.msg);
    CHECK(!strcmp(text_of(path2(src, "model.safetensors")), "fp32"));
    /* a folder with other things in it, and a plain file */
    const char *home = path2(tu_tmpdir(), "home");
    mkdir(home, 0755);
    CHECK(tu_write_file(path2(home, "notes.txt"), "mine", 4) == 0);
    CHECK(write_model(home, NULL, "int8", true, false, &e) == BERT8_ERR_INVALID_ARG);
    CHECK(strstr(e.msg, "not a model folder") != NULL);
    CHECK(!strcmp(text_of(path2(home, "notes.txt")), "mine"));
    CHECK(write_model(path2(home, "notes.txt"), NULL, "x", true, false, &e) ==
          BERT8_ERR_INVALID_ARG);
    /* an empty folder is fine */
    const char *empty = path2(tu_tmpdir(), "empty");
    mkdir(empty, 0755);
    CHECK(write_model(empty, src, "int8", true, false, &e) == BERT8_OK);
    CHECK(!strcmp(text_of(path2(empty, "config.json")), "int8"));
}

TEST(second_writer_in_the_same_parent_is_refused) {
    b8_atomic_dir *a = NULL, *b = NULL;
    b8_err e = {0};
    CHECK(b8_atomic_dir_begin(path2(tu_tmpdir(), "w1"), NULL, &a, &e) == BERT8_OK);
    CHECK(b8_atomic_dir_begin(path2(tu_tmpdir(), "w2"), NULL, &b, &e) == BERT8_ERR_IO);
    CHECK(b == NULL && strstr(e.msg, "another process"));
    b8_atomic_dir_free(a);
    CHECK(b8_atomic_dir_begin(path2(tu_tmpdir(), "w2"), NULL, &b, &e) == BERT8_OK);
    b8_atomic_dir_free(b);
    b8_atomic_dir_free(NULL);
    /* bad names */
    CHECK(b8_atomic_dir_begin("", NULL, &b, &e) == BERT8_ERR_INVALID_ARG);
    CHECK(b8_atomic_dir_begin("/", NULL, &b, &e) == BERT8_ERR_INVALID_ARG);
    CHECK(b8_atomic_dir_begin("/nonexistent-parent/x", NULL, &b, &e) == BERT8_ERR_IO);
}

TEST(copy_file_copies_and_refuses_non_regular_files) {
    b8_atomic_dir *d = NULL;
    b8_err e = {0};
    const char *src = path2(tu_tmpdir(), "copy_src.txt");
    CHECK(tu_write_file(src, "hello", 5) == 0);
    CHECK(b8_atomic_dir_begin(path2(tu_tmpdir(), "copied"), NULL, &d, &e) == BERT8_OK);
    CHECK(b8_atomic_dir_copy_file(d, src, "vocab.txt", &e) == BERT8_OK);
    CHECK(b8_atomic_dir_copy_file(d, tu_tmpdir(), "x", &e) == BERT8_ERR_IO);
    CHECK(b8_atomic_dir_write_file(d, "../escape", "x", 1, &e) == BERT8_ERR_INVALID_ARG);
    CHECK(b8_atomic_dir_commit(d, &e) == BERT8_OK);
    CHECK(b8_atomic_dir_commit(d, &e) == BERT8_ERR_INVALID_ARG);
    b8_atomic_dir_free(d);
    CHECK(!strcmp(text_of(path2(tu_tmpdir(), "copied/vocab.txt")), "hello"));
}

/* A full disk: the write fails with a message naming ENOSPC and the old folder is intact. */
static char tiny[1100];

TEST(full_disk_gives_a_clear_error_and_keeps_the_old_folder) {
    char dest[1200];
    snprintf(dest, sizeof dest, "%s/model", tiny);
    make_model(dest, "old");
    size_t big = 2u << 20;
    char *blob = calloc(1, big);
    b8_atomic_dir *d = NULL;
    b8_err e = {0};
    CHECK(b8_atomic_dir_begin(dest, NULL, &d, &e) == BERT8_OK);
    if (d) {
        bert8_status st = b8_atomic_dir_write_file(d, "model.safetensors", blob, big, &e);
        CHECKF(st == BERT8_ERR_IO && strstr(e.msg, "No space left"), "%s", e.msg);
        b8_atomic_dir_free(d);
    }
    CHECK(!strcmp(text_of(path2(dest, "model.safetensors")), "old"));
    CHECK(count_prefix(tiny, ".model.") == 0);
    /* the space is back, and a write that fits still commits */
    CHECK(write_model(dest, NULL, "new", true, false, &e) == BERT8_OK);
    CHECK(!strcmp(text_of(path2(dest, "model.safetensors")), "new"));
    free(blob);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "full-disk")) {
        snprintf(tiny, sizeof tiny, "%s/tiny", tu_tmpdir());
        mkdir(tiny, 0755);
        if (mount("tmpfs", tiny, "tmpfs", 0, "size=1m") != 0) {
            printf("skipped: cannot mount a 1 MiB tmpfs on %s (%s)\n", tiny, strerror(errno));
            tu_finish();
            return 77;
        }
        RUN(full_disk_gives_a_clear_error_and_keeps_the_old_folder);
        CHECK(umount(tiny) == 0);
        return tu_finish();
    }
    RUN(new_folder_appears_whole);
    RUN(existing_model_is_replaced_by_exchange_and_by_two_renames);
    RUN(aborted_write_leaves_old_folder_and_no_temporary);
    RUN(stale_temporaries_and_backups_of_killed_writers_are_cleaned_up);
    RUN(source_folder_and_non_model_folders_are_never_replaced);
    RUN(second_writer_in_the_same_parent_is_refused);
    RUN(copy_file_copies_and_refuses_non_regular_files);
    return tu_finish();
}
