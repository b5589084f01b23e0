/*
 * args.c: the flag parser and the shared messages, exit codes and helpers of args.h. Every message
 * goes to stderr behind the one prefix "nibble CMD: " that arg_parse sets; text from a file is
 * shown with its control bytes as \xHH (arg_text, arg_safe), and JSON strings escape them.
 */
#include "cli/args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>

static const char *prog = "nibble"; /* "nibble CMD" once arg_parse has run */
static char prog_buf[64];

static void say(const char *kind, const char *fmt, va_list ap) {
    fprintf(stderr, "%s: %s", prog, kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int arg_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say("", fmt, ap);
    va_end(ap);
    return CLI_FAIL;
}

void arg_note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say("note: ", fmt, ap);
    va_end(ap);
}

int arg_usage_error(const arg_spec *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say("", fmt, ap);
    va_end(ap);
    fputs(s->usage, stderr);
    return CLI_USAGE;
}

int arg_status(nb_status s) {
    /* the library's message may quote the file (a tensor name, an architecture): escaped */
    const char *msg = *nb_last_error() ? nb_last_error() : nb_strerror(s);
    fprintf(stderr, "%s: %s", prog, s == NB_ERR_NOMEM ? "out of memory: " : "");
    arg_text(stderr, msg, strlen(msg));
    fputc('\n', stderr);
    return s == NB_ERR_INVALID_ARG ? CLI_USAGE : CLI_FAIL;
}

/* The index of word in a '|'-separated list ("md|json"), or -1. */
static int list_index(const char *list, const char *word, int nocase) {
    const size_t n = strlen(word);
    for (int k = 0;; k++) {
        const char *bar = strchr(list, '|');
        const size_t len = bar ? (size_t)(bar - list) : strlen(list);
        if (len == n && !(nocase ? strncasecmp(list, word, n) : memcmp(list, word, n))) return k;
        if (!bar) return -1;
        list = bar + 1;
    }
}

static int spelled(const char *names, const char *name) { return list_index(names, name, 0) >= 0; }

int arg_given(const arg_spec *s, const char *name) {
    for (int i = 0; i < s->n_opts; i++)
        if (spelled(s->opts[i].names, name)) return s->opts[i].given;
    return 0;
}

static int parse_long(const char *v, long *out) {
    char *end;
    errno = 0;
    *out = strtol(v, &end, 10);
    return !errno && end != v && !*end;
}

/* One option's value into its destination; 1 ok, 0 after a message. */
static int take(const arg_spec *s, const arg_opt *o, const char *flag, const char *v) {
    long l;
    switch (o->kind) {
    case ARG_FLAG: *(int *)o->out = 1; return 1;
    case ARG_STR: *(const char **)o->out = v; return 1;
    case ARG_INT:
        if (parse_long(v, &l) && l >= o->lo && l <= o->hi) {
            *(int *)o->out = (int)l;
            return 1;
        }
        arg_usage_error(s, "%s '%s': expected an integer in [%.0f, %.0f]", flag, v, o->lo, o->hi);
        return 0;
    case ARG_U64: {
        char *end;
        errno = 0;
        unsigned long long u = strtoull(v, &end, 0);
        if (!errno && end != v && !*end && *v != '-') {
            *(uint64_t *)o->out = u;
            return 1;
        }
        arg_usage_error(s, "%s '%s': expected a non-negative integer", flag, v);
        return 0;
    }
    case ARG_FLOAT: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (!errno && end != v && !*end && isfinite(d) && d >= o->lo && d <= o->hi) {
            *(float *)o->out = (float)d;
            return 1;
        }
        arg_usage_error(s, "%s '%s': expected a number in [%g, %g]", flag, v, o->lo, o->hi);
        return 0;
    }
    case ARG_CHOICE: {
        const int k = list_index(o->choices, v, 1);
        if (k >= 0) {
            *(int *)o->out = k;
            return 1;
        }
        arg_usage_error(s, "%s '%s': expected one of %s", flag, v, o->choices);
        return 0;
    }
    case ARG_LIST: {
        arg_list *li = o->out;
        li->n = 0;
        for (const char *p = v;;) {
            char *end;
            errno = 0;
            l = strtol(p, &end, 10);
            if (errno || end == p || (*end && *end != ',') || l < o->lo || l > o->hi || li->n == ARG_LIST_MAX) {
                arg_usage_error(s, "%s '%s': expected up to %d comma-separated integers in [%.0f, %.0f]", flag, v,
                                ARG_LIST_MAX, o->lo, o->hi);
                return 0;
            }
            li->v[li->n++] = (int)l;
            if (!*end) return 1;
            p = end + 1;
        }
    }
    case ARG_CHOICES: {
        arg_list *li = o->out;
        li->n = 0;
        for (const char *p = v;;) {
            const char *comma = strchr(p, ',');
            char word[64];
            const size_t len = comma ? (size_t)(comma - p) : strlen(p);
            int k = -1;
            if (len < sizeof word) {
                memcpy(word, p, len);
                word[len] = '\0';
                k = list_index(o->choices, word, 1);
            }
            if (k < 0 || li->n == ARG_LIST_MAX) {
                arg_usage_error(s, "%s '%s': expected up to %d comma-separated values of %s", flag, v, ARG_LIST_MAX,
                                o->choices);
                return 0;
            }
            li->v[li->n++] = k;
            if (!comma) return 1;
            p = comma + 1;
        }
    }
    case ARG_STRS: {
        arg_strs *li = o->out;
        if (li->n == ARG_STRS_MAX) {
            arg_usage_error(s, "%s: at most %d of them", flag, ARG_STRS_MAX);
            return 0;
        }
        li->v[li->n++] = v;
        return 1;
    }
    case ARG_IGNORED: arg_note("%s %s ignored: %s", flag, v, o->choices); return 1;
    }
    return 0;
}

int arg_parse(arg_spec *s, int argc, char **argv) {
    snprintf(prog_buf, sizeof prog_buf, "nibble %s", s->cmd);
    prog = prog_buf;
    int options = 1; /* until "--" */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
            fputs(s->usage, stdout);
            return CLI_OK;
        }
        if (options && !strcmp(a, "--")) {
            options = 0;
            continue;
        }
        if (!options || a[0] != '-' || !a[1]) {
            if (s->n_pos == s->max_pos)
                return s->max_pos ? arg_usage_error(s, "unexpected argument '%s'", a)
                                  : arg_usage_error(s, "unexpected argument '%s' (this command takes only options)", a);
            s->pos[s->n_pos++] = a;
            continue;
        }
        arg_opt *o = NULL;
        for (int k = 0; k < s->n_opts && !o; k++)
            if (spelled(s->opts[k].names, a)) o = &s->opts[k];
        if (!o) return arg_usage_error(s, "unknown option '%s'", a);
        const char *v = NULL;
        if (o->kind != ARG_FLAG) {
            if (i + 1 >= argc) return arg_usage_error(s, "option %s needs a value", a);
            v = argv[++i];
        }
        if (!take(s, o, a, v)) return CLI_USAGE;
        o->given++;
    }
    return -1;
}

char *arg_read_file(const char *path, size_t *len) {
    const int std_in = !strcmp(path, "-");
    FILE *f = std_in ? stdin : fopen(path, "rb");
    if (!f) {
        arg_error("cannot open '%s': %s", path, strerror(errno));
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
    const int err = ferror(f) ? errno : 0;
    if (!std_in) fclose(f);
    if (!buf || err) {
        const char *name = std_in ? "standard input" : path;
        if (buf) arg_error("cannot read '%s': %s", name, strerror(err));
        else arg_error("out of memory reading '%s'", name);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* c as it is shown to a terminal, into out[4]: itself, or \xHH for a control byte; returns the length. */
static size_t shown(unsigned char c, char out[4]) {
    if (c >= 0x20 && c != 0x7F) return out[0] = (char)c, 1;
    static const char hex[] = "0123456789ABCDEF";
    out[0] = '\\', out[1] = 'x', out[2] = hex[c >> 4], out[3] = hex[c & 15];
    return 4;
}

void arg_text(FILE *f, const char *p, size_t n) {
    char buf[4];
    for (size_t i = 0; i < n; i++) fwrite(buf, 1, shown((unsigned char)p[i], buf), f);
}

const char *arg_safe(int slot, const char *s) {
    static char bufs[2][256];
    char *b = bufs[slot & 1];
    size_t o = 0;
    for (; *s && o + 4 < sizeof bufs[0]; s++) o += shown((unsigned char)*s, b + o);
    b[o] = '\0';
    return b;
}

uint64_t arg_peak_rss(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_maxrss * 1024;
}

int arg_cache_type(int choice) {
    static const int types[] = {NB_TYPE_F16, NB_TYPE_F32, NB_TYPE_BF16, NB_TYPE_Q8_0, NB_TYPE_Q4_0}; /* ARG_CACHE_TYPES */
    return types[choice];
}

void arg_cache_apply(const arg_cache *c, nb_ctx_params *p) {
    static const int fa[] = {NB_FA_AUTO, NB_FA_ON, NB_FA_OFF};
    p->type_k = arg_cache_type(c->k);
    p->type_v = arg_cache_type(c->v);
    p->flash_attn = fa[c->fa];
    p->swa_full = c->swa_full;
    p->fast_prefill = c->fast_prefill;
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
