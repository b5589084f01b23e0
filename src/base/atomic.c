#include "base/atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

/* ------------------------------------------------------------ clean-up registry */

/* Names of the temporary files of writes in progress, for nb_remove_temp_files() in a signal
 * handler: fixed arrays, so the handler never reads memory a release could free under it. A slot
 * is 0 free, 1 being filled, 2 listed. A full registry (more writes at once than slots) only means
 * the extra files are not listed. */
#define TEMP_SLOTS 16
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the signal handler needs lock-free atomic ints");
static char temp_names[TEMP_SLOTS][PATH_MAX];
static atomic_int temp_state[TEMP_SLOTS];

static int list_temp(const char *name) {
    size_t n = strlen(name);
    if (n >= PATH_MAX) return 0;
    for (int i = 0; i < TEMP_SLOTS; i++) {
        int free_slot = 0;
        if (atomic_compare_exchange_strong(&temp_state[i], &free_slot, 1)) {
            memcpy(temp_names[i], name, n + 1);
            atomic_store(&temp_state[i], 2);
            return i + 1;
        }
    }
    return 0;
}

static void unlist_temp(int slot) {
    if (slot > 0 && slot <= TEMP_SLOTS) atomic_store(&temp_state[slot - 1], 0);
}

/* unlink() and lock-free atomics only: async-signal-safe. Slots stay listed, so a later
 * commit or abort releases its own slot as usual. */
void nb_remove_temp_files(void) {
    for (int i = 0; i < TEMP_SLOTS; i++)
        if (atomic_load(&temp_state[i]) == 2) unlink(temp_names[i]);
}

/* ------------------------------------------------------------ the target */

static void release(nb_atomic_file *a) {
    unlist_temp(a->slot); /* before the name is freed or can be reused */
    free(a->path);
    free(a->tmp);
    a->path = a->tmp = NULL;
    a->f = NULL;
    a->slot = 0;
    a->to_stdout = 0;
}

/* The directory part of p ("." when it has none); NULL when out of memory. */
static char *dir_of(const char *p) {
    const char *slash = strrchr(p, '/');
    if (!slash) return strdup(".");
    if (slash == p) return strdup("/");
    return strndup(p, (size_t)(slash - p));
}

static const char *kind_of(mode_t m) {
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISLNK(m)) return "a symbolic link";
    return "a special file";
}

/* A new file needs its directory; mkstemp's ENOENT alone would not say which one is missing. */
static nb_status check_dir(const char *path, const char *what) {
    char *dir = dir_of(path);
    if (!dir) return nb_fail(NB_ERR_NOMEM, "%s: names for '%s'", what, path);
    struct stat st;
    nb_status s = NB_OK;
    if (stat(dir, &st) != 0)
        s = nb_fail(NB_ERR_IO, "%s: cannot write '%s': directory '%s': %s", what, path, dir,
                    errno == ENOENT ? "does not exist" : strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        s = nb_fail(NB_ERR_IO, "%s: cannot write '%s': '%s' is not a directory", what, path, dir);
    free(dir);
    return s;
}

/* The entry the rename will replace: path itself, or a symlink's final target, so that the link
 * stays a link and its target gets the new bytes (what `cp` does). Links are read one at a time
 * rather than with realpath() so that a dangling one can be reported with its target. *out is
 * malloc'd; it is absent (path only, never a link's target) or a regular file. */
#define MAX_LINKS 40 /* Linux's own limit for one lookup */
static nb_status resolve_target(const char *path, const char *what, char **out) {
    *out = NULL;
    char *cur = strdup(path);
    if (!cur) return nb_fail(NB_ERR_NOMEM, "%s: names for '%s'", what, path);
    nb_status s = NB_OK;
    for (int links = 0;; links++) {
        struct stat st;
        if (lstat(cur, &st) != 0) {
            if (errno == ENOENT && links == 0) {
                s = check_dir(path, what);
            } else if (errno == ENOENT) {
                s = nb_fail(NB_ERR_INVALID_ARG,
                            "%s: output '%s' is a dangling symbolic link ('%s' does not exist); nibble replaces "
                            "the target of a link, not the link",
                            what, path, cur);
            } else if (links == 0) {
                s = nb_fail(NB_ERR_IO, "%s: cannot check output '%s': %s", what, path, strerror(errno));
            } else {
                s = nb_fail(NB_ERR_IO, "%s: cannot check output '%s' (link target '%s'): %s", what, path, cur,
                            strerror(errno));
            }
            break;
        }
        if (S_ISLNK(st.st_mode)) {
            if (links == MAX_LINKS) {
                s = nb_fail(NB_ERR_INVALID_ARG,
                            "%s: output '%s' is a symbolic link that does not resolve (a loop, or more than %d links)",
                            what, path, MAX_LINKS);
                break;
            }
            char target[PATH_MAX];
            ssize_t n = readlink(cur, target, sizeof target);
            if (n < 0 || (size_t)n >= sizeof target) {
                s = nb_fail(n < 0 ? NB_ERR_IO : NB_ERR_INVALID_ARG,
                            "%s: cannot read symbolic link '%s' (output '%s'): %s", what, cur, path,
                            n < 0 ? strerror(errno) : "target too long");
                break;
            }
            target[n] = '\0';
            char *next;
            if (target[0] == '/') {
                next = strdup(target);
            } else { /* relative to the link's own directory */
                char *dir = dir_of(cur);
                size_t dl = dir ? strlen(dir) : 0;
                next = dir ? malloc(dl + 1 + (size_t)n + 1) : NULL;
                if (next) {
                    memcpy(next, dir, dl);
                    next[dl] = '/';
                    memcpy(next + dl + 1, target, (size_t)n + 1);
                }
                free(dir);
            }
            free(cur);
            if (!(cur = next)) return nb_fail(NB_ERR_NOMEM, "%s: names for '%s'", what, path);
            continue;
        }
        if (!S_ISREG(st.st_mode)) {
            if (links == 0)
                s = nb_fail(NB_ERR_INVALID_ARG,
                            "%s: output '%s' is %s, not a regular file; nibble only replaces regular files", what,
                            path, kind_of(st.st_mode));
            else
                s = nb_fail(NB_ERR_INVALID_ARG,
                            "%s: output '%s' is a symbolic link to '%s', which is %s, not a regular file; nibble only "
                            "replaces regular files",
                            what, path, cur, kind_of(st.st_mode));
        }
        break;
    }
    if (s) free(cur);
    else *out = cur;
    return s;
}

/* ------------------------------------------------------------ open, commit, abort */

nb_status nb_atomic_open(nb_atomic_file *a, const char *path, const char *what) {
    return nb_atomic_open_ex(a, path, what, 0);
}

/* An empty path, or "-" where standard output is not allowed. */
static nb_status refuse_name(const char *path, const char *what, unsigned flags) {
    if (!path || !*path) return nb_fail(NB_ERR_INVALID_ARG, "%s: empty output path", what);
    if (!strcmp(path, "-") && !(flags & NB_ATOMIC_ALLOW_STDOUT))
        return nb_fail(NB_ERR_INVALID_ARG,
                       "%s: '-' (standard output) is not supported for this output; write './-' for a file of "
                       "that name",
                       what);
    return NB_OK;
}

nb_status nb_output_check(const char *path, const char *what) {
    nb_status s = refuse_name(path, what, 0);
    char *target = NULL;
    if (!s) s = resolve_target(path, what, &target);
    free(target);
    return s;
}

nb_status nb_atomic_open_ex(nb_atomic_file *a, const char *path, const char *what, unsigned flags) {
    memset(a, 0, sizeof *a);
    nb_status s = refuse_name(path, what, flags);
    if (s) return s;
    if (!strcmp(path, "-")) {
        if (!(a->path = strdup(path))) return nb_fail(NB_ERR_NOMEM, "%s: names for '%s'", what, path);
        a->f = stdout;
        a->to_stdout = 1;
        return NB_OK;
    }
    if ((s = resolve_target(path, what, &a->path))) return s;
    size_t n = strlen(a->path);
    if (!(a->tmp = malloc(n + sizeof ".tmp.XXXXXX"))) {
        release(a);
        return nb_fail(NB_ERR_NOMEM, "%s: names for '%s'", what, path);
    }
    memcpy(a->tmp, a->path, n);
    memcpy(a->tmp + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    /* mkstemp opens with O_CREAT|O_EXCL: never an existing entry, never through a planted link */
    int fd = mkstemp(a->tmp);
    if (fd < 0) {
        s = nb_fail(NB_ERR_IO, "%s: cannot create a temporary file beside '%s': %s", what, a->path, strerror(errno));
        release(a);
        return s;
    }
    a->slot = list_temp(a->tmp); /* a signal before this line leaves the file: a few instructions */
    fchmod(fd, 0644);           /* mkstemp makes 0600; outputs are meant to be shared like their inputs */
    if (!(a->f = fdopen(fd, "wb"))) {
        s = nb_fail(NB_ERR_IO, "%s: cannot open a temporary file beside '%s': %s", what, a->path, strerror(errno));
        close(fd);
        unlink(a->tmp);
        release(a);
        return s;
    }
    return NB_OK;
}

/* The rename is only durable once the directory entry is on disk. File systems that cannot sync
 * a directory say EINVAL: nothing more can be done there, so it is not a failure. */
static nb_status sync_dir(const char *path, const char *what) {
    char *dir = dir_of(path);
    if (!dir) return nb_fail(NB_ERR_NOMEM, "%s: names for '%s'", what, path);
    nb_status s = NB_OK;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL))
        s = nb_fail(NB_ERR_IO, "%s: '%s' is in place but its directory '%s' could not be synced: %s", what, path, dir,
                    strerror(errno));
    if (fd >= 0) close(fd);
    free(dir);
    return s;
}

nb_status nb_atomic_commit(nb_atomic_file *a, const char *what) {
    nb_status s = NB_OK;
    if (a->to_stdout) {
        if (!a->f || fflush(a->f) != 0 || ferror(a->f))
            s = nb_fail(NB_ERR_IO, "%s: writing to standard output failed: %s", what, strerror(errno));
        release(a);
        return s;
    }
    int ok = a->f && fflush(a->f) == 0 && fsync(fileno(a->f)) == 0;
    int err = ok ? 0 : errno;
    if (a->f && fclose(a->f) != 0 && ok) {
        err = errno;
        ok = 0;
    }
    a->f = NULL;
    if (ok) {
        /* open checked the target; look again so that a device or FIFO put there since is not
         * replaced either (a race remains between this look and the rename) */
        struct stat st;
        if (lstat(a->path, &st) == 0 && !S_ISREG(st.st_mode)) {
            unlink(a->tmp);
            s = nb_fail(NB_ERR_INVALID_ARG,
                        "%s: output '%s' became %s while it was written; nibble only replaces regular files", what,
                        a->path, kind_of(st.st_mode));
            release(a);
            return s;
        }
        if (rename(a->tmp, a->path) != 0) {
            err = errno;
            ok = 0;
        }
    }
    if (!ok) {
        if (a->tmp) unlink(a->tmp);
        s = nb_fail(NB_ERR_IO, "%s: writing '%s' failed: %s", what, a->path ? a->path : "?", strerror(err));
    } else {
        s = sync_dir(a->path, what);
    }
    release(a);
    return s;
}

void nb_atomic_abort(nb_atomic_file *a) {
    if (a->to_stdout) { /* stdout is the caller's: what was written stays written */
        release(a);
        return;
    }
    if (a->f) fclose(a->f);
    if (a->tmp) unlink(a->tmp);
    release(a);
}
