/*
 * atomic.h: files written whole or not at all. The bytes go to PATH.tmp.XXXXXX beside the target
 * (same directory, so the final rename cannot cross file systems); nb_atomic_commit() flushes,
 * fsyncs and renames it over PATH, then fsyncs the directory, and any failure or nb_atomic_abort()
 * removes it, so an interrupted or failed write leaves the old file as it was.
 *
 * Only regular files are replaced (docs/SECURITY.md, "Output files"): an absent PATH is created, a
 * regular file is replaced, a symbolic link is followed and its final target replaced (the link
 * stays a link); a device, FIFO, socket or directory, a dangling or looping link, and "-" (unless
 * NB_ATOMIC_ALLOW_STDOUT) are refused with NB_ERR_INVALID_ARG before anything is created.
 * Every temporary file still open is listed for nb_remove_temp_files() (nibble.h), the signal
 * handler's clean-up.
 */
#ifndef NB_BASE_ATOMIC_H
#define NB_BASE_ATOMIC_H

#include <stdio.h>

#include "nibble.h"

typedef struct nb_atomic_file {
    FILE *f;    /* open for writing on the temporary file (or stdout); NULL when not open */
    char *path; /* the target: the link's final target when PATH was a symlink; "-" for stdout */
    char *tmp;  /* the temporary name; NULL for stdout */
    int slot;   /* 1 + its index in the clean-up registry; 0 when not listed (so a zeroed a is safe) */
    int to_stdout;
} nb_atomic_file;

/* nb_atomic_open_ex flags. */
enum {
    NB_ATOMIC_ALLOW_STDOUT = 1, /* "-" means standard output: commit flushes it, nothing closes it */
};

/* Checks the target and creates the temporary file (mode 0644). `what` names the caller in
 * messages ("gguf writer"). Same as nb_atomic_open_ex(a, path, what, 0): "-" is refused. */
nb_status nb_atomic_open(nb_atomic_file *a, const char *path, const char *what);
nb_status nb_atomic_open_ex(nb_atomic_file *a, const char *path, const char *what, unsigned flags);
/* Completes the file: flush, fsync, close, rename, fsync the directory. Releases a whether it
 * succeeds or not. On stdout: flush only. */
nb_status nb_atomic_commit(nb_atomic_file *a, const char *what);
/* Closes and removes the temporary file and releases a; harmless on a zeroed or released a.
 * Leaves stdout alone. */
void nb_atomic_abort(nb_atomic_file *a);

#endif
