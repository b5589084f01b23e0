/*
 * test.h: the tiny test harness every tests/test_*.c uses.
 *
 *   TEST(name) { CHECK(cond, "fmt", ...); }
 *   int main(void) { RUN(name); ...; return test_summary(); }
 *
 * A test passes when none of its CHECKs failed. test_summary() prints "N passed, N failed" for the
 * program (tests/run.sh adds the programs up) and returns non-zero on any failure. SKIP() records a
 * test that cannot run on this machine, with the reason printed, and counts it as skipped.
 */
#ifndef NB_TEST_H
#define NB_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int test_failed_checks, test_passed, test_failed, test_skipped, test_skip_current;
static const char *test_current;

#define TEST(name) static void name(void)

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            if (test_failed_checks < 20 || getenv("NB_TEST_VERBOSE")) {                     \
                printf("FAIL %s (%s:%d): ", test_current, __FILE__, __LINE__);     \
                printf(__VA_ARGS__);                                               \
                putchar('\n');                                                        \
            }                                                                               \
            test_failed_checks++;                                                           \
        }                                                                                   \
    } while (0)

#define SKIP(...)                                                    \
    do {                                                             \
        printf("skipped: %s: ", test_current);                       \
        printf(__VA_ARGS__);                                         \
        putchar('\n');                                               \
        test_skip_current = 1;                                       \
        return;                                                      \
    } while (0)

#define RUN(name) test_run(#name, name)

static inline void test_run(const char *name, void (*fn)(void)) {
    int before = test_failed_checks;
    test_current = name;
    test_skip_current = 0;
    fn();
    if (test_skip_current) test_skipped++;
    else if (test_failed_checks == before) test_passed++;
    else {
        test_failed++;
        printf("FAILED: %s (%d checks)\n", name, test_failed_checks - before);
    }
}

/* The nibble binary next to this test program: BUILD/tests/test_x -> BUILD/nibble. */
static inline void test_nibble_bin(const char *argv0, char *out, size_t cap) {
    snprintf(out, cap, "%s", argv0);
    char *slash = strrchr(out, '/');
    if (slash) *slash = '\0';
    slash = strrchr(out, '/');
    if (slash) snprintf(slash + 1, cap - (size_t)(slash + 1 - out), "nibble");
    else snprintf(out, cap, "../nibble");
}

/* A whole file (its first cap-1 bytes) into buf, NUL-terminated; "" when it cannot be read. */
static inline void test_slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
}

/* Runs a shell command with its stdout into out (NUL-terminated, at most cap-1 bytes); returns
 * its exit status, or -1 when it did not exit normally. Tests of the CLI use it. */
static inline int test_sh(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* KL(p || q) of two rows of n logits, in double, and (same_top, may be NULL) whether their top
 * tokens agree. */
static inline double test_kl(const float *p, const float *q, int n, int *same_top) {
    int tp = 0, tq = 0;
    for (int v = 1; v < n; v++) tp = p[v] > p[tp] ? v : tp, tq = q[v] > q[tq] ? v : tq;
    double zp = 0, zq = 0, kl = 0;
    for (int v = 0; v < n; v++) zp += exp(p[v] - p[tp]), zq += exp(q[v] - q[tq]);
    for (int v = 0; v < n; v++) {
        const double lp = p[v] - p[tp] - log(zp), lq = q[v] - q[tq] - log(zq);
        kl += exp(lp) * (lp - lq);
    }
    if (same_top) *same_top = tp == tq;
    return kl;
}

static inline int test_summary(void) {
    if (test_skipped) printf("%d passed, %d failed, %d skipped\n", test_passed, test_failed, test_skipped);
    else printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed != 0;
}

#endif
