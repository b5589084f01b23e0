/*
 * test_files.c: output files (src/base/atomic.c). Which entries a write may replace (regular
 * files, and a symlink's target), which it refuses and that nothing is created then, "-" only
 * where allowed, no temporary file left after an abort, and nb_remove_temp_files() from a child
 * process and from a real SIGTERM/SIGINT handler. Everything happens in a fresh directory under /tmp.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include "base/atomic.h"
#include "explain/svg.h"
#include "nibble.h"
#include "test.h"

static char root[64];

/* A fresh directory for one test: root/name. */
static const char *dir_for(const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", root, name);
    mkdir(out, 0755);
    return out;
}

static int count_temps(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static void put_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* The file's bytes as a string ("" when it cannot be read). */
static const char *slurp(const char *path) {
    static char buf[4096];
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static nb_status write_text(const char *path, const char *text) {
    nb_atomic_file a;
    nb_status s = nb_atomic_open(&a, path, "test");
    if (s) return s;
    fputs(text, a.f);
    return nb_atomic_commit(&a, "test");
}

static int is_kind(const char *path, mode_t kind) {
    struct stat st;
    return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == kind;
}

/* A refusal: INVALID_ARG, the path named, the kind said, nothing created beside it. */
static void check_refused(const char *dir, const char *path, const char *kind) {
    nb_atomic_file a;
    nb_status s = nb_atomic_open(&a, path, "test");
    CHECK(s == NB_ERR_INVALID_ARG, "%s: status %d (%s)", path, (int)s, nb_last_error());
    CHECK(strstr(nb_last_error(), path) != NULL, "message does not name '%s': %s", path, nb_last_error());
    CHECK(!kind || strstr(nb_last_error(), kind) != NULL, "message does not say '%s': %s", kind, nb_last_error());
    CHECK(a.f == NULL && a.tmp == NULL && a.path == NULL, "%s: refused open left state behind", path);
    CHECK(count_temps(dir) == 0, "%s: a temporary file was created", path);
    nb_atomic_abort(&a); /* harmless on a refused one */
    /* the check a long job runs first says the same */
    char said[1024];
    snprintf(said, sizeof said, "%s", nb_last_error());
    CHECK(nb_output_check(path, "test") == s && !strcmp(nb_last_error(), said), "nb_output_check on %s: %s", path,
          nb_last_error());
}

TEST(output_check_accepts) {
    char d[128], p[192];
    dir_for("check", d, sizeof d);
    snprintf(p, sizeof p, "%s/new.gguf", d);
    CHECK(nb_output_check(p, "test") == NB_OK && access(p, F_OK) != 0, "an absent file: %s", nb_last_error());
    put_file(p, "old");
    CHECK(nb_output_check(p, "test") == NB_OK && !strcmp(slurp(p), "old"), "a regular file: %s", nb_last_error());
    CHECK(nb_output_check("-", "test") == NB_ERR_INVALID_ARG && strstr(nb_last_error(), "standard output"), "'-'");
    snprintf(p, sizeof p, "%s/no/such/dir.gguf", d);
    CHECK(nb_output_check(p, "test") == NB_ERR_IO, "a missing directory: %s", nb_last_error());
    CHECK(count_temps(d) == 0, "a check created a file");
}

TEST(new_file) {
    char d[128], p[192];
    dir_for("new", d, sizeof d);
    snprintf(p, sizeof p, "%s/out.bin", d);
    CHECK(write_text(p, "fresh") == NB_OK, "%s", nb_last_error());
    CHECK(!strcmp(slurp(p), "fresh"), "content '%s'", slurp(p));
    struct stat st;
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0644, "mode %o", (unsigned)(st.st_mode & 0777));
    CHECK(count_temps(d) == 0, "temporary file left");
}

TEST(replace_regular) {
    char d[128], p[192];
    dir_for("regular", d, sizeof d);
    snprintf(p, sizeof p, "%s/out.bin", d);
    put_file(p, "old contents");
    CHECK(write_text(p, "new") == NB_OK, "%s", nb_last_error());
    CHECK(!strcmp(slurp(p), "new"), "content '%s'", slurp(p));
    CHECK(is_kind(p, S_IFREG), "not a regular file afterwards");
    CHECK(count_temps(d) == 0, "temporary file left");
}

TEST(missing_directory) {
    char d[128], p[192];
    dir_for("nodir", d, sizeof d);
    snprintf(p, sizeof p, "%s/absent/out.bin", d);
    nb_atomic_file a;
    CHECK(nb_atomic_open(&a, p, "test") == NB_ERR_IO, "%s", nb_last_error());
    char want[192];
    snprintf(want, sizeof want, "%s/absent'", d);
    CHECK(strstr(nb_last_error(), want) != NULL, "message does not name the directory: %s", nb_last_error());
    CHECK(count_temps(d) == 0, "temporary file created");
}

TEST(fifo_refused) {
    char d[128], p[192];
    dir_for("fifo", d, sizeof d);
    snprintf(p, sizeof p, "%s/pipe", d);
    if (mkfifo(p, 0644) != 0) SKIP("mkfifo: %s", strerror(errno));
    check_refused(d, p, "FIFO");
    CHECK(is_kind(p, S_IFIFO), "the FIFO was replaced");
}

TEST(directory_refused) {
    char d[128], p[192];
    dir_for("dir", d, sizeof d);
    snprintf(p, sizeof p, "%s/sub", d);
    mkdir(p, 0755);
    check_refused(d, p, "a directory");
    CHECK(is_kind(p, S_IFDIR), "the directory was replaced");
    CHECK(count_temps(p) == 0, "temporary file created inside the directory");
}

TEST(char_device_refused) {
    char d[128], p[192];
    dir_for("chr", d, sizeof d);
    snprintf(p, sizeof p, "%s/null", d);
    if (mknod(p, S_IFCHR | 0666, makedev(1, 3)) != 0) {
        if (errno == EPERM) SKIP("mknod needs CAP_MKNOD (not root, or a container without it)");
        CHECK(0, "mknod: %s", strerror(errno));
        return;
    }
    check_refused(d, p, "character device");
    CHECK(is_kind(p, S_IFCHR), "the character device was replaced");
}

TEST(symlink_followed) {
    char d[128], t[192], l[192], sub[192], l2[256], l3[256];
    dir_for("link", d, sizeof d);
    snprintf(t, sizeof t, "%s/target.gguf", d);
    snprintf(l, sizeof l, "%s/link.gguf", d);
    put_file(t, "old");
    CHECK(symlink("target.gguf", l) == 0, "symlink: %s", strerror(errno));
    CHECK(write_text(l, "via link") == NB_OK, "%s", nb_last_error());
    CHECK(is_kind(l, S_IFLNK), "the link is no longer a link");
    char got[256] = {0};
    CHECK(readlink(l, got, sizeof got - 1) > 0 && !strcmp(got, "target.gguf"), "link now points to '%s'", got);
    CHECK(is_kind(t, S_IFREG) && !strcmp(slurp(t), "via link"), "target holds '%s'", slurp(t));
    CHECK(count_temps(d) == 0, "temporary file left");

    /* a chain from another directory, relative targets resolved against each link's directory */
    snprintf(sub, sizeof sub, "%s/sub", d);
    mkdir(sub, 0755);
    snprintf(l2, sizeof l2, "%s/a", sub);
    snprintf(l3, sizeof l3, "%s/b", sub);
    CHECK(symlink("b", l2) == 0 && symlink("../link.gguf", l3) == 0, "symlink: %s", strerror(errno));
    CHECK(write_text(l2, "chain") == NB_OK, "%s", nb_last_error());
    CHECK(is_kind(l2, S_IFLNK) && is_kind(l3, S_IFLNK) && is_kind(l, S_IFLNK), "a link of the chain was replaced");
    CHECK(!strcmp(slurp(t), "chain"), "target holds '%s'", slurp(t));
    CHECK(count_temps(d) == 0 && count_temps(sub) == 0, "temporary file left");
}

TEST(symlink_refusals) {
    char d[128], p[192], q[192], f[192];
    dir_for("badlink", d, sizeof d);
    snprintf(p, sizeof p, "%s/dangling", d);
    CHECK(symlink("missing", p) == 0, "symlink: %s", strerror(errno));
    check_refused(d, p, "dangling");
    CHECK(is_kind(p, S_IFLNK), "the dangling link was replaced");
    snprintf(q, sizeof q, "%s/missing", d);
    CHECK(access(q, F_OK) != 0, "the link's target was created");

    snprintf(p, sizeof p, "%s/loop1", d);
    snprintf(q, sizeof q, "%s/loop2", d);
    CHECK(symlink("loop2", p) == 0 && symlink("loop1", q) == 0, "symlink: %s", strerror(errno));
    check_refused(d, p, "does not resolve");
    CHECK(is_kind(p, S_IFLNK) && is_kind(q, S_IFLNK), "a looping link was replaced");

    snprintf(f, sizeof f, "%s/pipe", d);
    snprintf(p, sizeof p, "%s/to_pipe", d);
    if (mkfifo(f, 0644) != 0) SKIP("mkfifo: %s", strerror(errno));
    CHECK(symlink("pipe", p) == 0, "symlink: %s", strerror(errno));
    check_refused(d, p, "FIFO");
    CHECK(strstr(nb_last_error(), f) != NULL, "message does not name the link's target: %s", nb_last_error());
    CHECK(is_kind(p, S_IFLNK) && is_kind(f, S_IFIFO), "the link or the FIFO was replaced");
}

/* A FIFO made at the path after open must not be replaced by commit either. */
TEST(changed_before_commit) {
    char d[128], p[192];
    dir_for("race", d, sizeof d);
    snprintf(p, sizeof p, "%s/out", d);
    nb_atomic_file a;
    CHECK(nb_atomic_open(&a, p, "test") == NB_OK, "%s", nb_last_error());
    if (!a.f) return;
    fputs("bytes", a.f);
    CHECK(mkfifo(p, 0644) == 0, "mkfifo: %s", strerror(errno));
    CHECK(nb_atomic_commit(&a, "test") == NB_ERR_INVALID_ARG, "commit over a new FIFO: %s", nb_last_error());
    CHECK(strstr(nb_last_error(), p) && strstr(nb_last_error(), "FIFO"), "message: %s", nb_last_error());
    CHECK(is_kind(p, S_IFIFO), "the FIFO was replaced");
    CHECK(count_temps(d) == 0, "temporary file left");
}

TEST(abort_leaves_nothing) {
    char d[128], p[192];
    dir_for("abort", d, sizeof d);
    snprintf(p, sizeof p, "%s/out", d);
    put_file(p, "keep me");
    nb_atomic_file a;
    CHECK(nb_atomic_open(&a, p, "test") == NB_OK, "%s", nb_last_error());
    if (a.f) fputs("half a file", a.f);
    CHECK(count_temps(d) == 1, "%d temporary files while writing", count_temps(d));
    nb_atomic_abort(&a);
    nb_atomic_abort(&a); /* twice is harmless */
    CHECK(count_temps(d) == 0, "temporary file left after abort");
    CHECK(!strcmp(slurp(p), "keep me"), "the old file changed: '%s'", slurp(p));
}

TEST(stdout_dash) {
    nb_atomic_file a;
    CHECK(nb_atomic_open(&a, "-", "gguf writer") == NB_ERR_INVALID_ARG, "'-' accepted by default");
    CHECK(strstr(nb_last_error(), "'-'") && strstr(nb_last_error(), "standard output"), "message: %s",
          nb_last_error());
    CHECK(a.f == NULL, "stdout handed out");

    /* allowed: stdout goes to a file of the test directory for the duration */
    char d[128], p[192];
    dir_for("stdout", d, sizeof d);
    snprintf(p, sizeof p, "%s/captured", d);
    fflush(stdout);
    int saved = dup(1), fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (saved < 0 || fd < 0) SKIP("dup/open: %s", strerror(errno));
    dup2(fd, 1);
    close(fd);
    nb_status s1 = nb_atomic_open_ex(&a, "-", "test", NB_ATOMIC_ALLOW_STDOUT);
    int got_stdout = a.f == stdout;
    if (!s1) fputs("raw;", a.f);
    nb_status s2 = s1 ? s1 : nb_atomic_commit(&a, "test");
    nb_atomic_file b;
    nb_status s3 = nb_atomic_open_ex(&b, "-", "test", NB_ATOMIC_ALLOW_STDOUT);
    if (!s3) fputs("aborted;", b.f);
    nb_atomic_abort(&b); /* leaves stdout open: the SVG below still reaches it */
    nb_svg *svg = NULL;
    nb_status s4 = nb_svg_begin("-", 10, 10, &svg);
    if (!s4) nb_svg_rect(svg, 1, 1, 2, 2, "#000", NULL);
    nb_status s5 = s4 ? s4 : nb_svg_end(svg);
    int still_open = fcntl(1, F_GETFD) != -1;
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    CHECK(!s1 && got_stdout, "open_ex('-') with NB_ATOMIC_ALLOW_STDOUT: %d", (int)s1);
    CHECK(!s2 && !s3 && !s4 && !s5, "statuses %d %d %d %d: %s", (int)s2, (int)s3, (int)s4, (int)s5, nb_last_error());
    CHECK(still_open, "commit or abort closed stdout");
    const char *out = slurp(p);
    CHECK(!strncmp(out, "raw;aborted;<?xml", 17) && strstr(out, "<rect x=\"1.00\"") && strstr(out, "</svg>"),
          "captured '%s'", out);
    CHECK(count_temps(d) == 0 && access("-", F_OK) != 0 && count_temps(".") == 0,
          "a file named '-' or a temporary was created");
}

/* More writes at once than the registry has slots: all of them still work. */
TEST(many_at_once) {
    char d[128], p[192];
    dir_for("many", d, sizeof d);
    enum { N = 20 };
    nb_atomic_file a[N];
    int opened = 0;
    for (int i = 0; i < N; i++) {
        snprintf(p, sizeof p, "%s/f%02d", d, i);
        if (nb_atomic_open(&a[i], p, "test") == NB_OK) opened++;
        if (a[i].f) fprintf(a[i].f, "file %d", i);
    }
    CHECK(opened == N, "%d of %d opened: %s", opened, N, nb_last_error());
    int committed = 0;
    for (int i = 0; i < N; i++)
        if (a[i].f && nb_atomic_commit(&a[i], "test") == NB_OK) committed++;
    CHECK(committed == N, "%d of %d committed: %s", committed, N, nb_last_error());
    char want[32];
    for (int i = 0; i < N; i++) {
        snprintf(p, sizeof p, "%s/f%02d", d, i);
        snprintf(want, sizeof want, "file %d", i);
        CHECK(!strcmp(slurp(p), want), "%s holds '%s'", p, slurp(p));
    }
    CHECK(count_temps(d) == 0, "temporary file left");
}

/* In a child: open, write, nb_remove_temp_files, exit. The parent sees no temporary file. */
TEST(remove_temp_files_direct) {
    char d[128], p[192];
    dir_for("remove", d, sizeof d);
    snprintf(p, sizeof p, "%s/out", d);
    put_file(p, "old");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        nb_atomic_file a[3];
        for (int i = 0; i < 3; i++) {
            char q[256];
            snprintf(q, sizeof q, "%s%s", p, i ? (i == 1 ? "1" : "2") : "");
            if (nb_atomic_open(&a[i], q, "test")) _exit(2);
            fputs("new bytes", a[i].f);
            fflush(a[i].f);
        }
        if (count_temps(d) != 3) _exit(3);
        nb_remove_temp_files();
        _exit(0);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid, "fork/wait: %s", strerror(errno));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status 0x%x", st);
    CHECK(count_temps(d) == 0, "%d temporary files left", count_temps(d));
    CHECK(!strcmp(slurp(p), "old"), "the old file changed: '%s'", slurp(p));
}

static void on_signal(int sig) {
    nb_remove_temp_files();
    _exit(128 + sig);
}

/* A real signal: the handler the CLI installs, in a child that is killed mid-write. */
static void signal_case(int sig, const char *name) {
    char d[128], p[192];
    dir_for(name, d, sizeof d);
    snprintf(p, sizeof p, "%s/out", d);
    put_file(p, "old");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, NULL);
        nb_atomic_file a;
        if (nb_atomic_open(&a, p, "test")) _exit(2);
        fputs("half written", a.f);
        fflush(a.f);
        if (count_temps(d) != 1) _exit(3);
        kill(getpid(), sig);
        _exit(4); /* not reached: the handler exits */
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid, "fork/wait: %s", strerror(errno));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 128 + sig, "%s: child status 0x%x, want exit %d", name, st, 128 + sig);
    CHECK(count_temps(d) == 0, "%s: %d temporary files left", name, count_temps(d));
    CHECK(!strcmp(slurp(p), "old"), "%s: the old file changed: '%s'", name, slurp(p));
}

TEST(remove_temp_files_sigterm) { signal_case(SIGTERM, "sigterm"); }
TEST(remove_temp_files_sigint) { signal_case(SIGINT, "sigint"); }

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/nb_files_XXXXXX");
    if (!mkdtemp(root)) {
        printf("cannot make a directory under /tmp: %s\n", strerror(errno));
        return 1;
    }
    if (chdir(root) != 0) return 1; /* a stray relative name lands here, not in the tree */
    RUN(new_file);
    RUN(output_check_accepts);
    RUN(replace_regular);
    RUN(missing_directory);
    RUN(fifo_refused);
    RUN(directory_refused);
    RUN(char_device_refused);
    RUN(symlink_followed);
    RUN(symlink_refusals);
    RUN(changed_before_commit);
    RUN(abort_leaves_nothing);
    RUN(stdout_dash);
    RUN(many_at_once);
    RUN(remove_temp_files_direct);
    RUN(remove_temp_files_sigterm);
    RUN(remove_temp_files_sigint);
    nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return test_summary();
}
