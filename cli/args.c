#include "cli/args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

const char *arg_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "nibble: option %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int arg_int(const char *flag, const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "nibble: %s '%s': expected an integer in [%ld, %ld]\n", flag, s, lo, hi);
        return 0;
    }
    *out = (int)v;
    return 1;
}

int arg_u64(const char *flag, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end || *s == '-') {
        fprintf(stderr, "nibble: %s '%s': expected a non-negative integer\n", flag, s);
        return 0;
    }
    *out = v;
    return 1;
}

int arg_float(const char *flag, const char *s, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "nibble: %s '%s': expected a number in [%g, %g]\n", flag, s, lo, hi);
        return 0;
    }
    *out = (float)v;
    return 1;
}

char *arg_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "nibble: cannot open '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t r; buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += r;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "nibble: cannot read '%s'\n", path);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

uint64_t arg_peak_rss(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_maxrss * 1024;
}

double arg_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int hex_val(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

size_t arg_unescape(char *s, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '\\' || i + 1 == len) {
            s[o++] = s[i];
            continue;
        }
        char c = s[++i];
        switch (c) {
        case 'n': s[o++] = '\n'; break;
        case 'r': s[o++] = '\r'; break;
        case 't': s[o++] = '\t'; break;
        case '\'': case '"': case '\\': s[o++] = c; break;
        default:
            if (c == 'x' && i + 2 < len && hex_val(s[i + 1]) >= 0 && hex_val(s[i + 2]) >= 0) {
                s[o++] = (char)(hex_val(s[i + 1]) * 16 + hex_val(s[i + 2]));
                i += 2;
            } else {
                s[o++] = '\\';
                s[o++] = c;
            }
        }
    }
    return o;
}

/* A JSON string: quotes, backslashes and control bytes escaped; bytes that are not valid UTF-8
 * become U+FFFD so the output always parses. */
void arg_json_str(FILE *f, const char *p, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c), i++;
        else if (c == '\n') fputs("\\n", f), i++;
        else if (c < 0x20 || c == 0x7F) fprintf(f, "\\u%04x", c), i++;
        else if (c < 0x80) fputc(c, f), i++;
        else {
            size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
            int ok = len && i + len <= n;
            for (size_t k = 1; ok && k < len; k++) ok = ((unsigned char)p[i + k] & 0xC0) == 0x80;
            if (ok && len == 3) { /* no overlong forms, no surrogates */
                unsigned b = (unsigned char)p[i + 1];
                ok = !(c == 0xE0 && b < 0xA0) && !(c == 0xED && b >= 0xA0);
            }
            if (ok && len == 4) {
                unsigned b = (unsigned char)p[i + 1];
                ok = !(c == 0xF0 && b < 0x90) && !(c == 0xF4 && b >= 0x90);
            }
            if (ok) fwrite(p + i, 1, len, f), i += len;
            else fputs("\\ufffd", f), i++;
        }
    }
    fputc('"', f);
}
