/*
 * atomic.h: files written whole or not at all. The bytes go to PATH.tmp.XXXXXX beside the target
 * (same directory, so the final rename cannot cross file systems); nb_atomic_commit() flushes,
 * fsyncs and renames it over PATH, and any failure or nb_atomic_abort() removes it, so an
 * interrupted or failed write leaves the old file as it was.
 */
#ifndef NB_BASE_ATOMIC_H
#define NB_BASE_ATOMIC_H

#include <stdio.h>

#include "nibble.h"

typedef struct nb_atomic_file {
    FILE *f;    /* open for writing on the temporary file; NULL when not open */
    char *path; /* the target */
    char *tmp;  /* the temporary name */
} nb_atomic_file;

/* Creates the temporary file (mode 0644). `what` names the caller in messages ("gguf writer"). */
nb_status nb_atomic_open(nb_atomic_file *a, const char *path, const char *what);
/* Completes the file: flush, fsync, close, rename. Releases a whether it succeeds or not. */
nb_status nb_atomic_commit(nb_atomic_file *a, const char *what);
/* Closes and removes the temporary file and releases a; harmless on a zeroed or released a. */
void nb_atomic_abort(nb_atomic_file *a);

#endif
