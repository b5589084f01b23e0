/*
 * test_abi.c: libnibble.so exports the public API and nothing else. The functions include/nibble.h
 * declares (NB_API) are listed with comments stripped; `nm -D --defined-only` of the library beside
 * the nibble binary must give exactly those. Names starting with '_' belong to the toolchain
 * (linker and sanitizer symbols) and are not counted.
 */
#include <ctype.h>
#include <limits.h>

#include "test.h"

#define MAX_NAMES 1024
#define NAME_CAP 128

typedef struct names {
    int n;
    char s[MAX_NAMES][NAME_CAP];
} names;

static char LIB[PATH_MAX];
static names header, exported;

static int has(const names *l, const char *s) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->s[i], s)) return 1;
    return 0;
}

static void add(names *l, const char *s, size_t len) {
    if (len >= NAME_CAP || l->n == MAX_NAMES) return;
    char buf[NAME_CAP];
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (!has(l, buf)) snprintf(l->s[l->n++], NAME_CAP, "%s", buf);
}

static int ident(int c) { return isalnum(c) || c == '_'; }

/* Every nb_* identifier followed by '(' outside comments: the header's function declarations
 * (function pointer types read "(*nb_x)(", so they are not taken). */
static int read_header(const char *path, names *out) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    static char text[1 << 18];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    for (char *p = text; *p; p++) { /* blank the comments */
        if (p[0] == '/' && p[1] == '*') {
            char *e = strstr(p + 2, "*/");
            char *end = e ? e + 2 : p + strlen(p);
            memset(p, ' ', (size_t)(end - p));
            p = end - 1;
        } else if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n') *p++ = ' ';
            if (!*p) break;
        }
    }
    for (char *p = text; (p = strstr(p, "nb_"));) {
        if (p > text && ident((unsigned char)p[-1])) {
            p += 3;
            continue;
        }
        char *e = p;
        while (ident((unsigned char)*e)) e++;
        char *q = e;
        while (*q == ' ' || *q == '\t' || *q == '\n') q++;
        if (*q == '(') add(out, p, (size_t)(e - p));
        p = e;
    }
    return 1;
}

/* Defined dynamic symbols of the library; 0 when nm could not run. */
static int read_exports(const char *lib, names *out) {
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s' 2>/dev/null", lib);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    char line[512];
    while (fgets(line, sizeof line, p)) {
        char addr[64], type[8], name[256];
        if (sscanf(line, "%63s %7s %255s", addr, type, name) != 3) continue;
        name[strcspn(name, "@")] = '\0'; /* a version suffix, if any */
        if (name[0] != '_') add(out, name, strlen(name));
    }
    return pclose(p) == 0;
}

TEST(exports_are_the_public_api) {
    if (system("command -v nm >/dev/null 2>&1") != 0) SKIP("nm (binutils) is not installed");
    CHECK(read_header("include/nibble.h", &header), "include/nibble.h unreadable (run from the repository root)");
    CHECK(header.n >= 100, "only %d functions found in include/nibble.h", header.n);
    CHECK(read_exports(LIB, &exported), "nm -D %s failed", LIB);
    int extra = 0, missing = 0;
    for (int i = 0; i < exported.n; i++)
        if (!has(&header, exported.s[i])) {
            if (extra++ < 10) printf("  exported, not in nibble.h: %s\n", exported.s[i]);
        }
    for (int i = 0; i < header.n; i++)
        if (!has(&exported, header.s[i])) {
            if (missing++ < 10) printf("  in nibble.h, not exported: %s\n", header.s[i]);
        }
    CHECK(extra == 0, "%d of %d exported symbols are not declared in include/nibble.h", extra, exported.n);
    CHECK(missing == 0, "%d of %d functions of include/nibble.h are not exported (NB_API?)", missing, header.n);
    CHECK(!has(&exported, "nb_fail"), "nb_fail, an internal function, is exported");
}

int main(int argc, char **argv) {
    (void)argc;
    /* the library lies beside the nibble binary: BUILD/nibble -> BUILD/libnibble.so */
    test_nibble_bin(argv[0], LIB, sizeof LIB);
    char *name = strrchr(LIB, '/') + 1; /* test_nibble_bin always gives a directory */
    snprintf(name, sizeof LIB - (size_t)(name - LIB), "libnibble.so");
    RUN(exports_are_the_public_api);
    return test_summary();
}
