/*
 * test_cli.c: the command line as a user meets it: --help, messages on bad flags and values, the
 * exit codes (0 success, 1 bad data or a runtime failure, 2 bad usage, 130/143 interrupted),
 * llama.cpp's flag spellings, output files that are not nibble's to replace, control bytes from a
 * file, Ctrl-C during run, perplexity --save-logits and quantize, and --chat's bounds. Tests
 * that need the default model skip (saying so) when it is absent; `make test` fetches it first.
 */
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nibble.h"
#include "test.h"

/* Absolute paths: every command runs inside TMPD, so that a regression that writes where it
 * should not writes there (a file named '-', a replaced device) and not into the tree. */
static char MODEL[PATH_MAX] = "models/gemma-3-270m-q4_k_m.gguf";
static char BIN[PATH_MAX], TMPD[64], TEXT[128]; /* TEXT: a long text this program writes */
static char OUT[1 << 16], ERR[1 << 16];

static int have_model(void) { return access(MODEL, R_OK) == 0; }

/* The shell line that runs `nibble ARGS` inside TMPD, standard input empty unless ARGS redirects
 * it, stdout and stderr into TMPD/stdout and TMPD/stderr. */
static void shell_line(char *cmd, size_t cap, const char *fmt, va_list ap) {
    char args[2048];
    vsnprintf(args, sizeof args, fmt, ap);
    snprintf(cmd, cap, "cd %s && exec %s </dev/null %s >stdout 2>stderr", TMPD, BIN, args);
}

/* TMPD/stdout and TMPD/stderr into OUT and ERR. */
static void collect(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/stdout", TMPD);
    test_slurp(path, OUT, sizeof OUT);
    snprintf(path, sizeof path, "%s/stderr", TMPD);
    test_slurp(path, ERR, sizeof ERR);
}

/* Runs `nibble ARGS` (shell_line); OUT and ERR get what it printed. Returns the exit status (-1
 * when it did not exit normally). */
static int cli(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int cli(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    shell_line(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    collect();
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* The count on a statistics line of `nibble run` ("generation:   240 tokens"), or -1. */
static long stat_count(const char *line) {
    const char *p = strstr(ERR, line);
    return p ? strtol(p + strlen(line), NULL, 10) : -1;
}

/* Files in TMPD whose name contains `part`; with `waiting`, only non-empty ones whose name starts
 * with it (the output a background command is writing). */
static int files(const char *part, int waiting) {
    DIR *d = opendir(TMPD);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[512];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", TMPD, e->d_name);
        if (!waiting) n += strstr(e->d_name, part) != NULL;
        else n += !strncmp(e->d_name, part, strlen(part)) && !stat(path, &st) && st.st_size > 0;
    }
    if (d) closedir(d);
    return n;
}

TEST(help_prints_usage_once_to_stdout) {
    static const char *const cmds[] = {"run",      "bench",         "bench kernels", "bench roofline", "inspect",
                                       "tokenize", "perplexity",    "quantize",      "imatrix",        "explain",
                                       "explain e2m1", "explain q4_k", "explain dot", "explain compare", "version"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        int rc = cli("%s --help", cmds[i]);
        CHECK(rc == 0, "%s --help: exit %d", cmds[i], rc);
        CHECK(!ERR[0], "%s --help wrote to stderr: %s", cmds[i], ERR);
        /* the first line of the usage appears once */
        char first[256];
        snprintf(first, sizeof first, "%.*s", (int)strcspn(OUT, "\n"), OUT);
        CHECK(!strncmp(OUT, "usage: nibble", 13) && count(OUT, first) == 1, "%s --help: usage not printed once:\n%s",
              cmds[i], OUT);
    }
}

/* Each bad flag or value: exit 2, a message naming the problem on stderr before the usage. */
TEST(bad_usage_says_what_before_the_usage) {
    static const struct {
        const char *args, *says;
    } cases[] = {
        {"bench roofline -t 0", "-t '0'"},
        {"bench roofline -t 1,x", "-t '1,x'"},
        {"bench kernels -o xml", "-o 'xml'"},
        {"bench kernels -r 0", "-r '0'"},
        {"bench nosuch", "unknown benchmark 'nosuch'"},
        {"tokenize -m M.gguf", "no text"},
        {"imatrix -m M.gguf -f T.txt", "-o FILE is required"},
        {"run -m M.gguf", "give a prompt"},
        {"run -m M.gguf -f - --chat", "-f - and -sysf - cannot"},
        {"run -m M.gguf -sysf - --chat", "-f - and -sysf - cannot"},
        {"run -m M.gguf -p hi -st", "--single-turn ends --chat"},
        {"run -m M.gguf -p hi -cnv -no-cnv", "contradict"},
        {"run -m M.gguf -p hi -e --no-escape", "contradict"},
        {"run -m M.gguf --chat -sys a -sysf b", "exclusive"},
        {"run -m M.gguf -p hi -sysf b", "add --chat"},
        {"run -m M.gguf -p hi --system be-terse", "--system"},
        {"run -m M.gguf -p hi -t 1024", "[1, 256]"},
        {"run -m M.gguf -p hi --frobnicate", "unknown option '--frobnicate'"},
        {"run -m M.gguf -p", "-p needs a value"},
        {"version --json", "unknown option '--json'"},
        {"inspect", "which model"},
        {"quantize a.gguf b.gguf", "2 of the 3 given"},
        {"quantize a.gguf b.gguf q4_0 --mode fast", "--mode 'fast'"},
        {"perplexity -m M.gguf", "give a text"},
        {"explain e2m1", "which code"},
        {"explain q4_k --byte 999", "byte 999 is outside"},
        {"explain dot --format mxfp4", "are required"},
        {"explain compare M.gguf", "TENSOR"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = cli("%s", cases[i].args);
        CHECK(rc == 2, "'%s': exit %d, want 2", cases[i].args, rc);
        const char *msg = strstr(ERR, cases[i].says), *use = strstr(ERR, "usage:");
        CHECK(msg && use && msg < use, "'%s': stderr should say \"%s\" before the usage:\n%s", cases[i].args,
              cases[i].says, ERR);
        CHECK(ERR[0] && !strncmp(ERR, "nibble", 6) && count(ERR, "nibble ") >= 1, "'%s': no message", cases[i].args);
        CHECK(!OUT[0], "'%s' wrote to stdout: %s", cases[i].args, OUT);
    }
}

TEST(threads_accepts_what_the_pool_accepts) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    int rc = cli("run -m %s -p hi -n 1 -t %d --temp 0", MODEL, NB_MAX_THREADS);
    CHECK(rc == 0, "-t %d (the pool's limit) refused: exit %d %s", NB_MAX_THREADS, rc, ERR);
    rc = cli("run -m %s -p hi -n 1 -t %d", MODEL, NB_MAX_THREADS + 1);
    CHECK(rc == 2 && strstr(ERR, "[1, 256]"), "-t %d: exit %d %s", NB_MAX_THREADS + 1, rc, ERR);
}

TEST(same_error_same_code) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    int rc = cli("explain %s blk.0.attn_output.weight --byte 999", MODEL);
    CHECK(rc == 2 && strstr(ERR, "byte 999 is outside"), "--byte past a real tensor's block: exit %d %s", rc, ERR);
    rc = cli("explain %s blk.0.attn_output.weight --row 99999999", MODEL);
    CHECK(rc == 2 && strstr(ERR, "--row 99999999 is out of range"), "--row past the tensor: exit %d %s", rc, ERR);
    rc = cli("explain %s no.such.tensor", MODEL);
    int rc2 = cli("explain compare %s no.such.tensor", MODEL);
    CHECK(rc == 2 && rc2 == 2, "a tensor the file lacks: explain %d, compare %d (want 2 both)", rc, rc2);
    rc = cli("run -m %s/absent.gguf -p hi", TMPD);
    CHECK(rc == 1 && strstr(ERR, "No such file") && !strstr(ERR, "(input/output error)") && count(ERR, "absent.gguf") == 1,
          "a missing model: exit %d, message said twice or not at all: %s", rc, ERR);
    rc = cli("run -m %s -c 40000 -p hi", MODEL);
    CHECK(rc == 2 && strstr(ERR, "32768"), "-c over the training context: exit %d %s", rc, ERR);
    rc = cli("perplexity -m %s -f %s -c 40000", MODEL, TEXT);
    rc2 = cli("imatrix -m %s -f %s -c 40000 -o %s/im.gguf", MODEL, TEXT, TMPD);
    CHECK(rc == 2 && rc2 == 2, "-c over the training context: perplexity %d, imatrix %d (want 2 both)", rc, rc2);
}

TEST(llama_cpp_spellings) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    static char a[sizeof OUT];
    int rc = cli("run --model %s --prompt 'The robot' --n-predict 6 --ctx-size 64 --threads 1 --seed 3 --temp 0.7 "
                 "--top-k 20 --top-p 0.9 --min-p 0.1 --repeat-penalty 1.1 --batch-size 16 -ngl 99 --no-conversation --escape",
                 MODEL);
    CHECK(rc == 0, "long spellings: exit %d %s", rc, ERR);
    CHECK(strstr(ERR, ", 1 thread,"), "the statistics should say '1 thread': %s", ERR);
    CHECK(strstr(ERR, "-ngl 99 ignored") && count(ERR, "-ngl") == 1, "-ngl should get one notice: %s", ERR);
    snprintf(a, sizeof a, "%s", OUT);
    rc = cli("run -m %s -p 'The robot' -n 6 -c 64 -t 1 -s 3 --temp 0.7 --top-k 20 --top-p 0.9 --min-p 0.1 "
             "--repeat-penalty 1.1 -b 16",
             MODEL);
    CHECK(rc == 0 && !strcmp(a, OUT), "short spellings gave other text (%d):\n%s\n---\n%s", rc, a, OUT);
    snprintf(a, sizeof a, "%s/prompt.txt", TMPD);
    FILE *f = fopen(a, "w");
    fputs("The robot", f);
    fclose(f);
    rc = cli("run -m %s --file %s -n 2 --temp 0", MODEL, a);
    CHECK(rc == 0 && !strncmp(OUT, "The robot", 9), "--file: exit %d %s", rc, ERR);
    rc = cli("tokenize --model %s --prompt hi --ids", MODEL);
    CHECK(rc == 0 && OUT[0] == '[', "tokenize --model --prompt: exit %d %s", rc, ERR);
}

TEST(long_prompt_is_refused_before_it_is_echoed) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    int rc = cli("run -m %s -c 64 -f %s", MODEL, TEXT);
    CHECK(rc == 1 && strstr(ERR, "context holds 64"), "exit %d: %s", rc, ERR);
    CHECK(!OUT[0], "the prompt was echoed before the refusal (%zu bytes)", strlen(OUT));
}

/* A GGUF whose strings hold terminal escape sequences. */
static void write_hostile(const char *path, const char *arch) {
    nb_gguf_writer *w;
    const float data[32] = {1};
    const int64_t ne[1] = {32};
    CHECK(!nb_gguf_writer_create(&w), "writer");
    nb_gguf_writer_set_string(w, "general.architecture", arch);
    nb_gguf_writer_set_string(w, "general.name", "evil\x1b]0;pwned\x07\x1b[31mred");
    nb_gguf_writer_add_tensor(w, "bad\x1b[2Jname", NB_TYPE_F32, 1, ne, data);
    CHECK(!nb_gguf_writer_write(w, path), "write %s: %s", path, nb_last_error());
    nb_gguf_writer_free(w);
}

TEST(text_output_escapes_control_bytes) {
    char path[128];
    snprintf(path, sizeof path, "%s/hostile.gguf", TMPD);
    write_hostile(path, "gemma3");
    int rc = cli("inspect %s --tensors", path);
    CHECK(rc == 0, "inspect: exit %d %s", rc, ERR);
    CHECK(!strchr(OUT, '\x1b') && !strchr(OUT, '\x07'), "raw control bytes reached the terminal:\n%s", OUT);
    CHECK(strstr(OUT, "evil\\x1B]0;pwned\\x07\\x1B[31mred") && strstr(OUT, "bad\\x1B[2Jname"),
          "control bytes should be shown as \\xHH:\n%s", OUT);
    rc = cli("inspect %s --json", path);
    CHECK(rc == 0 && strstr(OUT, "evil\\u001b") && !strchr(OUT, '\x1b'), "--json escapes: %d %s", rc, OUT);
    /* a library message quoting the file is escaped too */
    write_hostile(path, "gem\x1b[31mma");
    rc = cli("run -m %s -p hi", path);
    CHECK(rc == 1 && strstr(ERR, "gem\\x1B[31mma") && !strchr(ERR, '\x1b'), "refusal of the architecture: %d %s", rc, ERR);
}

/* inspect names the kernel each matrix runs on: Q4_0 matrices of a multiple of 8 rows take the
 * 8-row order, the others the type's own kernel. */
TEST(inspect_names_kernels_by_matrix) {
    char path[128];
    snprintf(path, sizeof path, "%s/q4_0_rows.gguf", TMPD);
    static const uint8_t zeros[16 * 18];
    nb_gguf_writer *w;
    CHECK(!nb_gguf_writer_create(&w), "writer");
    nb_gguf_writer_set_string(w, "general.architecture", "llama");
    const int64_t sixteen[2] = {32, 16}, twelve[2] = {32, 12};
    nb_gguf_writer_add_tensor(w, "a.weight", NB_TYPE_Q4_0, 2, sixteen, zeros);
    nb_gguf_writer_add_tensor(w, "b.weight", NB_TYPE_Q4_0, 2, sixteen, zeros);
    nb_gguf_writer_add_tensor(w, "c.weight", NB_TYPE_Q4_0, 2, twelve, zeros);
    CHECK(!nb_gguf_writer_write(w, path), "write %s: %s", path, nb_last_error());
    nb_gguf_writer_free(w);
    int rc = cli("inspect %s", path);
    CHECK(rc == 0 && strstr(OUT, "q4_0 x q8_0 (8-row order) (2 matrices), ") && strstr(OUT, "q4_0 x q8_0 (1)"),
          "inspect: exit %d %s%s", rc, OUT, ERR);
    rc = cli("inspect %s --json", path);
    CHECK(rc == 0 && strstr(OUT, "(8-row order) (2 matrices), "), "inspect --json: exit %d %s%s", rc, OUT, ERR);
}

TEST(quantized_inputs_are_named_as_such) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    int rc = cli("explain compare %s blk.0.ffn_down.weight --rows 4", MODEL);
    CHECK(rc == 0 && strstr(ERR, "is q6_K in the file: the baseline is its decoded values"),
          "compare on a quantized tensor: exit %d %s", rc, ERR);
    rc = cli("explain compare %s blk.0.attn_norm.weight", MODEL);
    CHECK(rc == 0 && !strstr(ERR, "baseline"), "compare on an F32 tensor noted a baseline: %s", ERR);
    char lp[128];
    snprintf(lp, sizeof lp, "%s/f12.lp", TMPD);
    FILE *f = fopen(lp, "w");
    fputs("garbage", f);
    fclose(f);
    rc = cli("perplexity -m %s --kld %s", MODEL, lp);
    CHECK(rc == 1 && count(ERR, "f12.lp") == 1 && !strstr(ERR, "input/output error"),
          "a bad --kld file: exit %d, its name should appear once: %s", rc, ERR);
}

TEST(svg_to_standard_output) {
    int rc = cli("explain e2m1 0101 --svg -");
    CHECK(rc == 0 && strstr(OUT, "<svg") && strstr(OUT, "</svg>"), "--svg -: exit %d %s", rc, ERR);
    CHECK(files("tmp", 0) == 0 && !files("-", 1), "--svg - left a file");
    rc = cli("explain q4_k --fixture article --svg -");
    CHECK(rc == 0 && strstr(OUT, "<svg"), "block --svg -: exit %d %s", rc, ERR);
}

/* quantize into entries that are not regular files; a symlink is followed. */
TEST(quantize_output_is_never_clobbered) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    char fifo[128], link[128], target[128];
    struct stat st;
    snprintf(fifo, sizeof fifo, "%s/fifo", TMPD);
    CHECK(mkfifo(fifo, 0644) == 0, "mkfifo");
    int rc = cli("quantize %s %s q4_0", MODEL, fifo);
    CHECK(rc == 2 && strstr(ERR, fifo) && strstr(ERR, "FIFO"), "a FIFO output: exit %d %s", rc, ERR);
    CHECK(!lstat(fifo, &st) && S_ISFIFO(st.st_mode), "the FIFO was replaced");
    /* a null device of our own: a regression replaces it, not the system's /dev/null */
    char dev[128];
    snprintf(dev, sizeof dev, "%s/null", TMPD);
    if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) == 0) {
        rc = cli("quantize %s %s q4_0", MODEL, dev);
        CHECK(rc == 2 && strstr(ERR, "character device") && !lstat(dev, &st) && S_ISCHR(st.st_mode),
              "a character device output: exit %d %s", rc, ERR);
    } else {
        printf("note: mknod not permitted here; the character-device case is covered by test_files\n");
    }
    /* imatrix refuses its output before it evaluates anything (an empty text would fail later) */
    char empty[128];
    snprintf(empty, sizeof empty, "%s/empty.txt", TMPD);
    FILE *f = fopen(empty, "w");
    fclose(f);
    rc = cli("imatrix -m %s -f %s -o %s", MODEL, empty, fifo);
    CHECK(rc == 2 && strstr(ERR, "FIFO") && !strstr(ERR, "token"), "imatrix -o FIFO: exit %d %s", rc, ERR);
    rc = cli("quantize %s - q4_0", MODEL);
    CHECK(rc == 2 && strstr(ERR, "standard output"), "'-' for a GGUF: exit %d %s", rc, ERR);
    snprintf(target, sizeof target, "%s/target.gguf", TMPD);
    snprintf(link, sizeof link, "%s/link.gguf", TMPD);
    f = fopen(target, "w");
    fputs("old", f);
    fclose(f);
    CHECK(symlink("target.gguf", link) == 0, "symlink");
    rc = cli("quantize %s %s q8_0", MODEL, link);
    CHECK(rc == 0, "quantize through a symlink: exit %d %s", rc, ERR);
    CHECK(!lstat(link, &st) && S_ISLNK(st.st_mode), "the symlink was replaced by a file");
    CHECK(!stat(target, &st) && st.st_size > 1000000, "the symlink's target was not written");
    CHECK(strstr(ERR, "already quantized"), "no note on requantizing a Q4_K_M file: %s", ERR);
    rc = cli("quantize %s %s q8_0 --allow-requantize", MODEL, target);
    CHECK(rc == 0 && !strstr(ERR, "already quantized"), "--allow-requantize keeps the note: %s", ERR);
    CHECK(files(".tmp.", 0) == 0, "temporary files left behind");
}

/* Runs `nibble ARGS` (shell_line) with SIGINT and SIGTERM at their defaults, as a terminal's
 * foreground job has them; once TMPD holds a file starting with `wait` (at most 60 s), and
 * `settle_ms` later, sends sig. Returns the exit status, 128 + the signal when it killed the
 * process, -1 when the wait ran out; OUT and ERR get what it printed. */
static int interrupt_when(const char *wait, int settle_ms, int sig, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int interrupt_when(const char *wait, int settle_ms, int sig, const char *fmt, ...) {
    char cmd[8192], out[128];
    va_list ap;
    va_start(ap, fmt);
    shell_line(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    snprintf(out, sizeof out, "%s/stdout", TMPD);
    unlink(out);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int i = 0;
    while (i++ < 6000 && !files(wait, 1)) usleep(10000);
    usleep(1000 * (useconds_t)settle_ms);
    kill(pid, sig);
    int st = 0;
    waitpid(pid, &st, 0);
    collect();
    if (i > 6000) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST(interrupted_writes_leave_no_temporary_file) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    int rc = interrupt_when("base.lp.tmp.", 0, SIGINT, "perplexity -m %s -f %s -c 128 --chunks 200 --save-logits %s/base.lp", MODEL,
                            TEXT, TMPD);
    CHECK(rc == 130, "SIGINT during --save-logits: exit %d %s", rc, ERR);
    CHECK(files("base.lp", 0) == 0, "--save-logits left a file after SIGINT");
    CHECK(strstr(ERR, "interrupted"), "no message on SIGINT: %s", ERR);
    rc = interrupt_when("q.gguf.tmp.", 0, SIGTERM, "quantize %s %s/q.gguf q8_0", MODEL, TMPD);
    CHECK(rc == 143, "SIGTERM during quantize: exit %d %s", rc, ERR);
    CHECK(files("q.gguf", 0) == 0, "quantize left a file after SIGTERM");
}

TEST(ctrl_c_stops_run_and_prints_statistics) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    /* stdout appears with the echoed prompt: generation is under way 300 ms later */
    int rc = interrupt_when("stdout", 300, SIGINT, "run -m %s -p 'Once upon a time' -n 100000 -c 32768 --ignore-eos -t 1",
                            MODEL);
    CHECK(rc == 130, "exit %d after Ctrl-C, want 130: %s", rc, ERR);
    CHECK(strstr(ERR, "generation:") && strstr(ERR, "peak memory:") && stat_count("generation:") > 0,
          "no statistics after Ctrl-C: %s", ERR);
    size_t n = strlen(OUT);
    CHECK(n > strlen("Once upon a time") && OUT[n - 1] == '\n', "no text, or it does not end in a newline: %s", OUT);
}

TEST(chat_bounds_its_input_lines) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    /* /dev/zero never ends a line: refused at the bound, without reading on */
    int rc = cli("run -m %s --chat < /dev/zero", MODEL);
    CHECK(rc == 1 && strstr(ERR, "longer than 1048576 bytes"), "an endless line: exit %d %s", rc, ERR);
}

TEST(chat_goes_on_when_the_context_fills) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    char in[128];
    snprintf(in, sizeof in, "%s/turns.txt", TMPD);
    FILE *f = fopen(in, "w");
    for (int i = 0; i < 6; i++) fprintf(f, "Tell me about the number %d and what it means to a robot.\n", i);
    fclose(f);
    int rc = cli("run -m %s --chat -c 160 -n 40 --ignore-eos --temp 0 --system 'You are terse.' < %s", MODEL, in);
    CHECK(rc == 0, "exit %d: %s", rc, ERR);
    CHECK(strstr(ERR, "oldest turn") && strstr(ERR, "system text stays"), "no note on dropped turns: %s", ERR);
    CHECK(stat_count("generation:") == 240, "every turn should get its 40 tokens: %s", ERR);
}

TEST(chat_reply_stops_at_the_default_per_turn) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    char in[128];
    snprintf(in, sizeof in, "%s/turn.txt", TMPD);
    FILE *f = fopen(in, "w");
    fputs("Count to a thousand.\n", f);
    fclose(f);
    int rc = cli("run -m %s --chat -c 2048 --ignore-eos --temp 0 -t 2 < %s", MODEL, in);
    CHECK(rc == 0 && stat_count("generation:") == 1024, "one reply without -n: exit %d %s", rc, ERR);
}

TEST(plural_and_one_prefix) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    char path[128];
    snprintf(path, sizeof path, "%s/empty.txt", TMPD);
    FILE *f = fopen(path, "w");
    fclose(f);
    int rc = cli("imatrix -m %s -f %s -o %s/im.gguf", MODEL, path, TMPD);
    CHECK(rc == 1 && strstr(ERR, "holds 1 token,"), "imatrix on an empty text: exit %d %s", rc, ERR);
    snprintf(path, sizeof path, "%s/short.txt", TMPD);
    f = fopen(path, "w");
    fputs("A few words only.", f);
    fclose(f);
    rc = cli("perplexity -m %s -f %s", MODEL, path);
    CHECK(rc == 1 && strstr(ERR, "nibble perplexity: the text is 6 tokens;") && !strstr(ERR, "perplexity: perplexity"),
          "one prefix: exit %d %s", rc, ERR);
}

int main(int argc, char **argv) {
    (void)argc;
    char path[PATH_MAX];
    test_nibble_bin(argv[0], path, sizeof path);
    if (!realpath(path, BIN)) snprintf(BIN, sizeof BIN, "%s", path);
    if (realpath(MODEL, path)) snprintf(MODEL, sizeof MODEL, "%s", path);
    snprintf(TMPD, sizeof TMPD, "/tmp/nb_cli_XXXXXX");
    if (!mkdtemp(TMPD)) return 1;
    /* about 60k tokens: longer than any -c below, enough for 200 windows of 128 */
    snprintf(TEXT, sizeof TEXT, "%s/long.txt", TMPD);
    FILE *f = fopen(TEXT, "w");
    if (!f) return 1;
    for (int i = 0; i < 3000; i++)
        fprintf(f, "Line %d: the robot counted %d brushes, painted %d walls and rested for %d minutes.\n", i,
                i * 7 % 101, i * 13 % 37, i % 60);
    fclose(f);
    RUN(help_prints_usage_once_to_stdout);
    RUN(bad_usage_says_what_before_the_usage);
    RUN(threads_accepts_what_the_pool_accepts);
    RUN(same_error_same_code);
    RUN(llama_cpp_spellings);
    RUN(long_prompt_is_refused_before_it_is_echoed);
    RUN(text_output_escapes_control_bytes);
    RUN(inspect_names_kernels_by_matrix);
    RUN(quantized_inputs_are_named_as_such);
    RUN(svg_to_standard_output);
    RUN(quantize_output_is_never_clobbered);
    RUN(interrupted_writes_leave_no_temporary_file);
    RUN(ctrl_c_stops_run_and_prints_statistics);
    RUN(chat_bounds_its_input_lines);
    RUN(chat_goes_on_when_the_context_fills);
    RUN(chat_reply_stops_at_the_default_per_turn);
    RUN(plural_and_one_prefix);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", TMPD);
    if (system(cmd)) printf("could not remove %s\n", TMPD);
    return test_summary();
}
