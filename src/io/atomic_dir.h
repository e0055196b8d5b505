/* atomic_dir.h: crash-safe replacement of a whole folder (a model folder written by
 * `bert8 quantize -o OUT`, bert8_model_save).
 *
 * The new folder is written into a temporary sibling `.<name>.tmp-<pid>` next to the
 * destination; commit fsyncs every file and folder in it and then swaps it into place, so that
 * a process killed at any point (or a full disk) leaves the destination holding either the
 * complete old folder or the complete new one, never a mix:
 *  - with renameat2(RENAME_EXCHANGE) (Linux 3.15+, ext4/xfs/btrfs/tmpfs...) the two folders
 *    trade names in one atomic step, and the old one is then deleted under the temporary name;
 *  - where the file system lacks it, the old folder is first renamed to `.<name>.old-<pid>`,
 *    the new one renamed into place, and the old one deleted. A kill between the two renames
 *    leaves no destination for an instant; the next b8_atomic_dir_begin() on it renames the
 *    backup back (recovery), and bert8 never reads `.old-` folders.
 * The parent folder is fsynced after the swap. b8_atomic_dir_begin() holds an exclusive flock
 * on the parent folder until commit or free, so two writers into one parent exclude each other
 * (the second fails at once with BERT8_ERR_IO) and every temporary or backup it finds there
 * belongs to a process that died: it deletes temporaries and restores or deletes backups.
 *
 * Safety rules: the destination may not be the source folder nor contain it (replacing it
 * would delete the source); an existing destination must be a folder that is empty or holds a
 * config.json (so `-o ~` cannot wipe a home folder). The destination is replaced as a whole:
 * files in the old folder that the new one lacks are gone after commit.
 */
#ifndef BERT8_ATOMIC_DIR_H
#define BERT8_ATOMIC_DIR_H

#include <stddef.h>

#include "base/common.h"

typedef struct b8_atomic_dir b8_atomic_dir;

/* Starts writing `dest`: locks the parent, cleans up after earlier killed writers and creates
 * the empty temporary folder. `source` (may be NULL) is a folder that must survive: dest may be
 * neither it nor an ancestor of it (BERT8_ERR_INVALID_ARG). */
bert8_status b8_atomic_dir_begin(const char *dest, const char *source, b8_atomic_dir **out,
                                 b8_err *e);

/* The temporary folder to write the new files into (valid until free). */
const char *b8_atomic_dir_path(const b8_atomic_dir *d);

/* Writes dir/<name> in the temporary folder (name may hold one level of sub-folder, created as
 * needed). A short write (a full disk) fails with BERT8_ERR_IO naming the file and the error. */
bert8_status b8_atomic_dir_write_file(b8_atomic_dir *d, const char *name, const void *data,
                                      size_t n, b8_err *e);
/* Copies the regular file `from` to <temporary folder>/<name>. */
bert8_status b8_atomic_dir_copy_file(b8_atomic_dir *d, const char *from, const char *name,
                                     b8_err *e);

/* fsyncs the temporary folder's files and folders, swaps it into place, fsyncs the parent and
 * deletes the old folder. On failure the destination is left as it was (old folder intact,
 * or still absent) and the temporary folder is deleted by b8_atomic_dir_free(). */
bert8_status b8_atomic_dir_commit(b8_atomic_dir *d, b8_err *e);

/* Deletes the temporary folder if it was not committed, releases the lock and frees d.
 * NULL is a no-op. */
void b8_atomic_dir_free(b8_atomic_dir *d);

/* For tests: make commit use the two-rename fallback instead of RENAME_EXCHANGE. */
void b8_atomic_dir_no_exchange(b8_atomic_dir *d);

/* Deletes a folder tree (no symlinks followed); used for temporaries. Returns 0 or -1. */
int b8_remove_tree(const char *path);

#endif
