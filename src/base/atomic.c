#include "base/atomic.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

static void release(nb_atomic_file *a) {
    free(a->path);
    free(a->tmp);
    a->path = a->tmp = NULL;
    a->f = NULL;
}

nb_status nb_atomic_open(nb_atomic_file *a, const char *path, const char *what) {
    memset(a, 0, sizeof *a);
    size_t n = strlen(path);
    a->path = strdup(path);
    a->tmp = malloc(n + sizeof ".tmp.XXXXXX");
    if (!a->path || !a->tmp) {
        release(a);
        return nb_fail(NB_ERR_NOMEM, "%s: names for '%s'", what, path);
    }
    memcpy(a->tmp, path, n);
    memcpy(a->tmp + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    int fd = mkstemp(a->tmp);
    if (fd < 0) {
        nb_status s = nb_fail(NB_ERR_IO, "%s: cannot create a temporary file beside '%s': %s", what, path, strerror(errno));
        release(a);
        return s;
    }
    fchmod(fd, 0644); /* mkstemp makes 0600; outputs are meant to be shared like their inputs */
    if (!(a->f = fdopen(fd, "wb"))) {
        nb_status s = nb_fail(NB_ERR_IO, "%s: cannot open a temporary file beside '%s': %s", what, path, strerror(errno));
        close(fd);
        unlink(a->tmp);
        release(a);
        return s;
    }
    return NB_OK;
}

nb_status nb_atomic_commit(nb_atomic_file *a, const char *what) {
    int ok = a->f && fflush(a->f) == 0 && fsync(fileno(a->f)) == 0;
    int err = ok ? 0 : errno;
    if (a->f && fclose(a->f) != 0 && ok) {
        err = errno;
        ok = 0;
    }
    a->f = NULL;
    if (ok && rename(a->tmp, a->path) != 0) {
        err = errno;
        ok = 0;
    }
    nb_status s = NB_OK;
    if (!ok) {
        if (a->tmp) unlink(a->tmp);
        s = nb_fail(NB_ERR_IO, "%s: writing '%s' failed: %s", what, a->path ? a->path : "?", strerror(err));
    }
    release(a);
    return s;
}

void nb_atomic_abort(nb_atomic_file *a) {
    if (a->f) fclose(a->f);
    if (a->tmp) unlink(a->tmp);
    release(a);
}
