#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>

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

nb_status nb_fail(nb_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}
