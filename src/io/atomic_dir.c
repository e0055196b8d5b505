/* atomic_dir.c: the crash-safe folder writer (see atomic_dir.h for the protocol). Everything
 * is done relative to a descriptor of the parent folder, which also carries the flock. */
#define _GNU_SOURCE
#include "io/atomic_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

struct b8_atomic_dir {
    int pfd;          /* the parent folder, flocked */
    char *parent;     /* its path, for messages */
    char *name;       /* the destination's name in the parent */
    char *dest;       /* parent/name */
    char *tmp_name;   /* .<name>.tmp-<pid> */
    char *tmp_path;   /* parent/.<name>.tmp-<pid> */
    char *old_name;   /* .<name>.old-<pid> (fallback swap only) */
    int committed;
    int no_exchange; /* tests: take the fallback path */
};

/* ---- Folder trees, relative to a directory descriptor --------------------------------- */

/* Deletes `name` under dfd and everything below it, without following symlinks. */
static int remove_at(int dfd, const char *name, int depth) {
    struct stat sb;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(sb.st_mode)) return unlinkat(dfd, name, 0);
    if (depth > 64) return -1;
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    DIR *dir = fdopendir(fd);
    if (!dir) {
        close(fd);
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (remove_at(fd, de->d_name, depth + 1) != 0) rc = -1;
    }
    closedir(dir); /* closes fd */
    if (unlinkat(dfd, name, AT_REMOVEDIR) != 0) rc = -1;
    return rc;
}

int b8_remove_tree(const char *path) {
    return remove_at(AT_FDCWD, path, 0);
}

/* fsyncs every regular file and folder under dfd/name (name included). Returns 0, or -1 with
 * errno and the failing entry's name in bad. */
static int fsync_at(int dfd, const char *name, int depth, char *bad, size_t bad_cap) {
    struct stat sb;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) goto fail;
    if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode)) return 0;
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) goto fail;
    if (S_ISDIR(sb.st_mode) && depth < 64) {
        int fd2 = dup(fd);
        DIR *dir = fd2 >= 0 ? fdopendir(fd2) : NULL;
        if (!dir) {
            if (fd2 >= 0) close(fd2);
            close(fd);
            goto fail;
        }
        struct dirent *de;
        while ((de = readdir(dir)) != NULL) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            if (fsync_at(fd, de->d_name, depth + 1, bad, bad_cap) != 0) {
                int err = errno;
                closedir(dir);
                close(fd);
                errno = err;
                return -1;
            }
        }
        closedir(dir);
    }
    if (fsync(fd) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        goto fail;
    }
    close(fd);
    return 0;
fail:
    snprintf(bad, bad_cap, "%s", name);
    return -1;
}

/* ---- Begin: lock, recover, check, create ----------------------------------------------- */

static char *cat3(const char *a, const char *b, const char *c) {
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s%s", a, b, c);
    return p;
}

/* `.<name>.<kind>-<digits>`: a temporary or backup of ours for this destination. */
static int is_ours(const char *entry, const char *name, const char *kind) {
    size_t nl = strlen(name), kl = strlen(kind);
    if (entry[0] != '.' || strncmp(entry + 1, name, nl) != 0 || entry[1 + nl] != '.') return 0;
    const char *p = entry + 2 + nl;
    if (strncmp(p, kind, kl) != 0 || p[kl] != '-') return 0;
    p += kl + 1;
    if (!*p) return 0;
    for (; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

/* Under the lock every temporary or backup left in the parent is a dead writer's: delete the
 * temporaries; put a backup back when the destination is missing (the writer died between
 * its two renames), else delete it. */
static bert8_status recover(b8_atomic_dir *d, b8_err *e) {
    int fd = dup(d->pfd);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        if (fd >= 0) close(fd);
        return b8_fail(e, BERT8_ERR_IO, "cannot list %s: %s", d->parent, strerror(errno));
    }
    rewinddir(dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    bert8_status st = BERT8_OK;
    while ((de = readdir(dir)) != NULL) {
        if (!is_ours(de->d_name, d->name, "tmp") && !is_ours(de->d_name, d->name, "old")) continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 8;
            char **nn = realloc(names, nc * sizeof *nn);
            if (!nn) {
                st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
                break;
            }
            names = nn;
            cap = nc;
        }
        if (!(names[n] = strdup(de->d_name))) {
            st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
            break;
        }
        n++;
    }
    closedir(dir);
    /* backups first: one may have to become the destination again */
    for (int pass = 0; pass < 2 && st == BERT8_OK; pass++) {
        for (size_t i = 0; i < n && st == BERT8_OK; i++) {
            bool old = is_ours(names[i], d->name, "old");
            if (old != (pass == 0)) continue;
            struct stat sb;
            if (old && fstatat(d->pfd, d->name, &sb, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) {
                if (renameat(d->pfd, names[i], d->pfd, d->name) != 0)
                    st = b8_fail(e, BERT8_ERR_IO,
                                 "%s is missing and its backup %s/%s cannot be put back: %s",
                                 d->dest, d->parent, names[i], strerror(errno));
                else if (fsync(d->pfd) != 0)
                    st = b8_fail(e, BERT8_ERR_IO, "cannot fsync %s: %s", d->parent,
                                 strerror(errno));
                continue;
            }
            if (remove_at(d->pfd, names[i], 0) != 0)
                st = b8_fail(e, BERT8_ERR_IO, "cannot delete the stale %s/%s: %s", d->parent,
                             names[i], strerror(errno));
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return st;
}

/* The canonical path of dest, which may not exist yet (its parent does). */
static char *canonical_dest(const b8_atomic_dir *d) {
    char *r = realpath(d->dest, NULL);
    if (r) return r;
    char *p = realpath(d->parent, NULL);
    if (!p) return NULL;
    char *full = cat3(p, strcmp(p, "/") ? "/" : "", d->name);
    free(p);
    return full;
}

static bert8_status check_source(const b8_atomic_dir *d, const char *source, b8_err *e) {
    if (!source) return BERT8_OK;
    char *rs = realpath(source, NULL);
    if (!rs) return BERT8_OK; /* no such folder: nothing to protect */
    char *rd = canonical_dest(d);
    bert8_status st = BERT8_OK;
    if (!rd) {
        st = b8_fail(e, BERT8_ERR_IO, "cannot resolve %s: %s", d->dest, strerror(errno));
    } else {
        size_t dl = strlen(rd);
        bool same = strcmp(rd, rs) == 0;
        bool inside = !same && strncmp(rs, rd, dl) == 0 && (rs[dl] == '/' || dl == 1);
        if (same || inside)
            st = b8_fail(e, BERT8_ERR_INVALID_ARG,
                         "refusing to replace %s: it %s the source model folder %s; write to "
                         "another folder",
                         d->dest, same ? "is" : "contains", source);
    }
    free(rd);
    free(rs);
    return st;
}

/* An existing destination is replaced only if it is a folder that is empty or a model. */
static bert8_status check_dest(const b8_atomic_dir *d, b8_err *e) {
    struct stat sb;
    if (fstatat(d->pfd, d->name, &sb, 0) != 0) {
        if (errno == ENOENT) return BERT8_OK;
        return b8_fail(e, BERT8_ERR_IO, "cannot stat %s: %s", d->dest, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode))
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "%s exists and is not a folder", d->dest);
    int fd = openat(d->pfd, d->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        if (fd >= 0) close(fd);
        return b8_fail(e, BERT8_ERR_IO, "cannot list %s: %s", d->dest, strerror(errno));
    }
    bool empty = true, model = false;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        empty = false;
        if (!strcmp(de->d_name, "config.json")) model = true;
    }
    closedir(dir);
    if (!empty && !model)
        return b8_fail(e, BERT8_ERR_INVALID_ARG,
                       "refusing to replace %s: it is not empty and holds no config.json (not a "
                       "model folder)",
                       d->dest);
    return BERT8_OK;
}

bert8_status b8_atomic_dir_begin(const char *dest, const char *source, b8_atomic_dir **out,
                                 b8_err *e) {
    if (!out) return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_atomic_dir_begin: out is NULL");
    *out = NULL;
    if (!dest || !dest[0])
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_atomic_dir_begin: no destination folder");
    b8_atomic_dir *d = calloc(1, sizeof *d);
    if (!d) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    d->pfd = -1;
    bert8_status st = BERT8_OK;
    /* split dest into parent and name, ignoring trailing slashes */
    size_t n = strlen(dest);
    while (n > 1 && dest[n - 1] == '/')
        n--;
    char *copy = strndup(dest, n);
    if (!copy) {
        free(d);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    }
    char *slash = strrchr(copy, '/');
    const char *name = slash ? slash + 1 : copy;
    if (!name[0] || !strcmp(name, ".") || !strcmp(name, "..")) {
        free(copy);
        free(d);
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "%s: name the destination folder itself", dest);
    }
    char pid[24];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    d->name = strdup(name);
    if (slash == copy)
        d->parent = strdup("/");
    else if (slash)
        d->parent = strndup(copy, (size_t)(slash - copy));
    else
        d->parent = strdup(".");
    free(copy);
    if (!d->name || !d->parent) {
        st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        goto fail;
    }
    char *dot = cat3(".", d->name, ".tmp-");
    char *odot = cat3(".", d->name, ".old-");
    d->tmp_name = dot ? cat3(dot, pid, "") : NULL;
    d->old_name = odot ? cat3(odot, pid, "") : NULL;
    free(dot);
    free(odot);
    const char *sep = strcmp(d->parent, "/") ? "/" : "";
    d->dest = cat3(d->parent, sep, d->name);
    d->tmp_path = d->tmp_name ? cat3(d->parent, sep, d->tmp_name) : NULL;
    if (!d->tmp_name || !d->old_name || !d->dest || !d->tmp_path) {
        st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        goto fail;
    }
    d->pfd = open(d->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->pfd < 0) {
        st = b8_fail(e, BERT8_ERR_IO, "cannot open the folder %s that is to hold %s: %s",
                     d->parent, d->name, strerror(errno));
        goto fail;
    }
    if (flock(d->pfd, LOCK_EX | LOCK_NB) != 0) {
        st = b8_fail(e, BERT8_ERR_IO,
                     errno == EWOULDBLOCK
                         ? "another process is writing a model folder in %s; try again when it "
                           "is done"
                         : "cannot lock %s",
                     d->parent);
        goto fail;
    }
    if ((st = check_source(d, source, e)) || (st = recover(d, e)) || (st = check_dest(d, e)))
        goto fail;
    if (mkdirat(d->pfd, d->tmp_name, 0755) != 0) {
        st = b8_fail(e, BERT8_ERR_IO, "cannot create %s: %s", d->tmp_path, strerror(errno));
        goto fail;
    }
    *out = d;
    return BERT8_OK;
fail:
    d->committed = 1; /* nothing of ours to delete */
    b8_atomic_dir_free(d);
    return st;
}

void b8_atomic_dir_no_exchange(b8_atomic_dir *d) {
    if (d) d->no_exchange = 1;
}

const char *b8_atomic_dir_path(const b8_atomic_dir *d) {
    return d ? d->tmp_path : NULL;
}

/* ---- Writing files --------------------------------------------------------------------- */

/* Opens <tmp>/<name> for writing, creating one level of sub-folder if name has one. */
static int create_in(b8_atomic_dir *d, const char *name, b8_err *e) {
    if (!name[0] || name[0] == '/' || strstr(name, "..")) {
        b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_atomic_dir: bad file name \"%s\"", name);
        return -1;
    }
    int tfd = openat(d->pfd, d->tmp_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (tfd < 0) {
        b8_fail(e, BERT8_ERR_IO, "cannot open %s: %s", d->tmp_path, strerror(errno));
        return -1;
    }
    const char *slash = strchr(name, '/');
    if (slash) {
        char sub[256];
        size_t sl = (size_t)(slash - name);
        if (sl == 0 || sl >= sizeof sub || strchr(slash + 1, '/')) {
            close(tfd);
            b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_atomic_dir: bad file name \"%s\"", name);
            return -1;
        }
        memcpy(sub, name, sl);
        sub[sl] = 0;
        if (mkdirat(tfd, sub, 0755) != 0 && errno != EEXIST) {
            b8_fail(e, BERT8_ERR_IO, "cannot create %s/%s: %s", d->tmp_path, sub, strerror(errno));
            close(tfd);
            return -1;
        }
    }
    int fd = openat(tfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = errno;
    close(tfd);
    if (fd < 0) b8_fail(e, BERT8_ERR_IO, "cannot create %s/%s: %s", d->tmp_path, name, strerror(err));
    return fd;
}

static bool write_all(int fd, const void *data, size_t n) {
    const char *p = data;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = ENOSPC;
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

bert8_status b8_atomic_dir_write_file(b8_atomic_dir *d, const char *name, const void *data,
                                      size_t n, b8_err *e) {
    if (!d || !name || (n && !data))
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_atomic_dir_write_file: bad arguments");
    int fd = create_in(d, name, e);
    if (fd < 0) return e ? e->status : BERT8_ERR_IO;
    bool ok = write_all(fd, data, n);
    int err = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok)
        return b8_fail(e, BERT8_ERR_IO, "error writing %s/%s: %s", d->tmp_path, name,
                       strerror(err));
    return BERT8_OK;
}

bert8_status b8_atomic_dir_copy_file(b8_atomic_dir *d, const char *from, const char *name,
                                     b8_err *e) {
    if (!d || !from || !name)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_atomic_dir_copy_file: bad arguments");
    size_t size = 0;
    int in = b8_open_regular(from, &size, e);
    if (in < 0) return e ? e->status : BERT8_ERR_IO;
    int out = create_in(d, name, e);
    if (out < 0) {
        close(in);
        return e ? e->status : BERT8_ERR_IO;
    }
    char buf[1 << 16];
    bert8_status st = BERT8_OK;
    for (;;) {
        ssize_t got = read(in, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            st = b8_fail(e, BERT8_ERR_IO, "error reading %s: %s", from, strerror(errno));
            break;
        }
        if (got == 0) break;
        if (!write_all(out, buf, (size_t)got)) {
            st = b8_fail(e, BERT8_ERR_IO, "error writing %s/%s: %s", d->tmp_path, name,
                         strerror(errno));
            break;
        }
    }
    close(in);
    if (close(out) != 0 && st == BERT8_OK)
        st = b8_fail(e, BERT8_ERR_IO, "error writing %s/%s: %s", d->tmp_path, name,
                     strerror(errno));
    return st;
}

/* ---- Commit ------------------------------------------------------------------------------ */

static int rename_exchange(int dfd, const char *a, const char *b) {
#ifdef SYS_renameat2
    return (int)syscall(SYS_renameat2, dfd, a, dfd, b, RENAME_EXCHANGE);
#else
    errno = ENOSYS;
    return -1;
#endif
}

bert8_status b8_atomic_dir_commit(b8_atomic_dir *d, b8_err *e) {
    if (!d || d->committed)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_atomic_dir_commit: nothing to commit");
    char bad[512] = "";
    /* 1. the new folder's contents reach the disk before any name changes */
    if (fsync_at(d->pfd, d->tmp_name, 0, bad, sizeof bad) != 0)
        return b8_fail(e, BERT8_ERR_IO, "cannot fsync %s (at %s): %s", d->tmp_path, bad,
                       strerror(errno));
    struct stat sb;
    bool exists = fstatat(d->pfd, d->name, &sb, AT_SYMLINK_NOFOLLOW) == 0;
    /* 2. the swap */
    if (!exists) {
        if (renameat(d->pfd, d->tmp_name, d->pfd, d->name) != 0)
            return b8_fail(e, BERT8_ERR_IO, "cannot rename %s to %s: %s", d->tmp_path, d->dest,
                           strerror(errno));
        d->committed = 1;
    } else if (!d->no_exchange && rename_exchange(d->pfd, d->tmp_name, d->name) == 0) {
        d->committed = 1; /* the old folder now sits under the temporary name */
    } else if (d->no_exchange || errno == EINVAL || errno == ENOSYS || errno == ENOTSUP ||
               errno == EPERM) {
        if (renameat(d->pfd, d->name, d->pfd, d->old_name) != 0)
            return b8_fail(e, BERT8_ERR_IO, "cannot move %s aside: %s", d->dest, strerror(errno));
        if (renameat(d->pfd, d->tmp_name, d->pfd, d->name) != 0) {
            int err = errno;
            if (renameat(d->pfd, d->old_name, d->pfd, d->name) != 0)
                return b8_fail(e, BERT8_ERR_IO,
                               "cannot rename %s to %s (%s), and the old folder stays at %s/%s "
                               "until the next write into %s puts it back",
                               d->tmp_path, d->dest, strerror(err), d->parent, d->old_name,
                               d->dest);
            return b8_fail(e, BERT8_ERR_IO, "cannot rename %s to %s: %s", d->tmp_path, d->dest,
                           strerror(err));
        }
        d->committed = 1;
    } else {
        return b8_fail(e, BERT8_ERR_IO, "cannot swap %s into place: %s", d->tmp_path,
                       strerror(errno));
    }
    /* 3. the new names reach the disk; then the old folder goes */
    if (fsync(d->pfd) != 0)
        return b8_fail(e, BERT8_ERR_IO, "cannot fsync %s: %s", d->parent, strerror(errno));
    remove_at(d->pfd, d->tmp_name, 0);
    remove_at(d->pfd, d->old_name, 0);
    return BERT8_OK;
}

void b8_atomic_dir_free(b8_atomic_dir *d) {
    if (!d) return;
    if (!d->committed && d->pfd >= 0 && d->tmp_name) remove_at(d->pfd, d->tmp_name, 0);
    if (d->pfd >= 0) close(d->pfd); /* releases the flock */
    free(d->parent);
    free(d->name);
    free(d->dest);
    free(d->tmp_name);
    free(d->tmp_path);
    free(d->old_name);
    free(d);
}
