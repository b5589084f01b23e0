/*
 * error.h: how the library reports failure. A function that fails calls nb_fail(), which stores
 * a formatted message in a thread-local buffer (read with nb_last_error()) and returns the status,
 * so a failure site is one line: `return nb_fail(NB_ERR_FORMAT, "tensor '%s': ...", name);`.
 */
#ifndef NB_BASE_ERROR_H
#define NB_BASE_ERROR_H

#include "nibble.h"

#if defined(__GNUC__)
#define NB_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define NB_PRINTF(a, b)
#endif

/* The message may quote nb_last_error() (chaining: "outer: %s"); that is well defined. */
nb_status nb_fail(nb_status s, const char *fmt, ...) NB_PRINTF(2, 3);
void nb_clear_error(void);

/* "s" unless n is 1, for counts in messages: "%lld token%s", (long long)n, nb_plural(n). */
static inline const char *nb_plural(long long n) { return n == 1 ? "" : "s"; }

#endif
