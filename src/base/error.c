#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *nb_strerror(nb_status s) {
    switch (s) {
    case NB_OK: return "ok";
    case NB_ERR_INVALID_ARG: return "invalid argument";
    case NB_ERR_IO: return "input/output error";
    case NB_ERR_FORMAT: return "malformed input";
    case NB_ERR_UNSUPPORTED: return "unsupported";
    case NB_ERR_OVERFLOW: return "size overflow";
    case NB_ERR_NOMEM: return "out of memory";
    case NB_ERR_RANGE: return "out of range";
    case NB_ERR_NONFINITE: return "non-finite value";
    }
    return "unknown status";
}

const char *nb_last_error(void) { return last_error; }

void nb_clear_error(void) { last_error[0] = '\0'; }

/* Formats into a local buffer first: callers chain by passing nb_last_error() as an argument, and
 * vsnprintf must not write the buffer it is reading. */
nb_status nb_fail(nb_status s, const char *fmt, ...) {
    char msg[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(msg, sizeof msg, fmt, ap) < 0) msg[0] = '\0';
    va_end(ap);
    memcpy(last_error, msg, strlen(msg) + 1);
    return s;
}
