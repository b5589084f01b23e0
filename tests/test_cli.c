/*
 * test_cli.c: the command line as a user meets it: --help, messages on bad flags and values, the
 * exit codes (0 success, 1 bad data or a runtime failure, 2 bad usage, 130/143 interrupted),
 * llama.cpp's flag spellings, output files that are not nibble's to replace, control bytes from a
 * file, Ctrl-C during run, perplexity --save-logits and quantize, and --chat's bounds. Tests
 * that need the default model skip (saying so) when it is absent; `make test` fetches it first.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nibble.h"
#include "test.h"

static const char *MODEL = "models/gemma-3-270m-q4_k_m.gguf";
static const char *TEXT = "models/jargon-4.4.7.txt";
static char BIN[256], DIR[64];
static char OUT[1 << 16], ERR[1 << 16];

static int have_model(void) { return access(MODEL, R_OK) == 0; }

static void slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
}

/* Runs `nibble ARGS` through sh with no standard input unless ARGS redirects it; stdout and
 * stderr land in OUT and ERR. Returns the exit status (-1 when it did not exit normally). */
static int cli(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int cli(const char *fmt, ...) {
    char args[2048], cmd[4096], o[128], e[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(o, sizeof o, "%s/stdout", DIR);
    snprintf(e, sizeof e, "%s/stderr", DIR);
    snprintf(cmd, sizeof cmd, "%s </dev/null %s >%s 2>%s", BIN, args, o, e);
    int st = system(cmd);
    slurp(o, OUT, sizeof OUT);
    slurp(e, ERR, sizeof ERR);
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

/* Files in DIR whose name contains `part` (temporary outputs left behind). */
static int leftovers(const char *part) {
    char cmd[256], out[4096];
    snprintf(cmd, sizeof cmd, "ls -a %s | grep -c -- '%s'", DIR, part);
    test_sh(cmd, out, sizeof out);
    return atoi(out);
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
        {"run -m M.gguf -p hi --chat", "--chat reads the conversation from standard input"},
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
    rc = cli("run -m %s/absent.gguf -p hi", DIR);
    CHECK(rc == 1 && strstr(ERR, "No such file") && !strstr(ERR, "(input/output error)") && count(ERR, "absent.gguf") == 1,
          "a missing model: exit %d, message said twice or not at all: %s", rc, ERR);
    rc = cli("run -m %s -c 40000 -p hi", MODEL);
    CHECK(rc == 2 && strstr(ERR, "32768"), "-c over the training context: exit %d %s", rc, ERR);
    rc = cli("perplexity -m %s -f %s -c 40000", MODEL, TEXT);
    rc2 = cli("imatrix -m %s -f %s -c 40000 -o %s/im.gguf", MODEL, TEXT, DIR);
    CHECK(rc == 2 && rc2 == 2, "-c over the training context: perplexity %d, imatrix %d (want 2 both)", rc, rc2);
}

TEST(llama_cpp_spellings) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    static char a[sizeof OUT];
    int rc = cli("run --model %s --prompt 'The robot' --n-predict 6 --ctx-size 64 --threads 1 --seed 3 --temp 0.7 "
                 "--top-k 20 --top-p 0.9 --min-p 0.1 --repeat-penalty 1.1 --batch-size 16 -ngl 99",
                 MODEL);
    CHECK(rc == 0, "long spellings: exit %d %s", rc, ERR);
    CHECK(strstr(ERR, "-ngl 99 ignored") && count(ERR, "-ngl") == 1, "-ngl should get one notice: %s", ERR);
    snprintf(a, sizeof a, "%s", OUT);
    rc = cli("run -m %s -p 'The robot' -n 6 -c 64 -t 1 -s 3 --temp 0.7 --top-k 20 --top-p 0.9 --min-p 0.1 "
             "--repeat-penalty 1.1 -b 16",
             MODEL);
    CHECK(rc == 0 && !strcmp(a, OUT), "short spellings gave other text (%d):\n%s\n---\n%s", rc, a, OUT);
    snprintf(a, sizeof a, "%s/prompt.txt", DIR);
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
    snprintf(path, sizeof path, "%s/hostile.gguf", DIR);
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

TEST(svg_to_standard_output) {
    int rc = cli("explain e2m1 0101 --svg -");
    CHECK(rc == 0 && strstr(OUT, "<svg") && strstr(OUT, "</svg>"), "--svg -: exit %d %s", rc, ERR);
    CHECK(leftovers("tmp") == 0 && access("-", F_OK) != 0, "--svg - left a file");
    rc = cli("explain q4_k --fixture article --svg -");
    CHECK(rc == 0 && strstr(OUT, "<svg"), "block --svg -: exit %d %s", rc, ERR);
}

/* quantize into entries that are not regular files; a symlink is followed. */
TEST(quantize_output_is_never_clobbered) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    char fifo[128], link[128], target[128];
    struct stat st;
    snprintf(fifo, sizeof fifo, "%s/fifo", DIR);
    CHECK(mkfifo(fifo, 0644) == 0, "mkfifo");
    int rc = cli("quantize %s %s q4_0", MODEL, fifo);
    CHECK(rc == 2 && strstr(ERR, fifo) && strstr(ERR, "FIFO"), "a FIFO output: exit %d %s", rc, ERR);
    CHECK(!lstat(fifo, &st) && S_ISFIFO(st.st_mode), "the FIFO was replaced");
    rc = cli("quantize %s /dev/null q4_0", MODEL);
    CHECK(rc == 2 && !stat("/dev/null", &st) && S_ISCHR(st.st_mode), "/dev/null output: exit %d %s", rc, ERR);
    rc = cli("quantize %s - q4_0", MODEL);
    CHECK(rc == 2 && strstr(ERR, "standard output"), "'-' for a GGUF: exit %d %s", rc, ERR);
    snprintf(target, sizeof target, "%s/target.gguf", DIR);
    snprintf(link, sizeof link, "%s/link.gguf", DIR);
    FILE *f = fopen(target, "w");
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
    CHECK(leftovers(".tmp.") == 0, "temporary files left behind");
}

/* Starts `nibble ARGS` in the background, waits until `file` exists (at most 60 s), sends sig and
 * returns the exit status; stderr into ERR. */
static int interrupt_when(const char *file, int sig, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int interrupt_when(const char *file, int sig, const char *fmt, ...) {
    char args[2048], cmd[8192], e[128], out[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(e, sizeof e, "%s/stderr", DIR);
    snprintf(cmd, sizeof cmd,
             "%s %s >%s/stdout 2>%s </dev/null & pid=$!; "
             "for i in $(seq 6000); do ls %s >/dev/null 2>&1 && break; sleep 0.01; done; "
             "kill -%d $pid; wait $pid; echo $?",
             BIN, args, DIR, e, file, sig);
    test_sh(cmd, out, sizeof out);
    slurp(e, ERR, sizeof ERR);
    char o[128];
    snprintf(o, sizeof o, "%s/stdout", DIR);
    slurp(o, OUT, sizeof OUT);
    return atoi(out);
}

TEST(interrupted_writes_leave_no_temporary_file) {
    if (!have_model() || access(TEXT, R_OK)) SKIP("model %s or text %s absent", MODEL, TEXT);
    char pat[128];
    snprintf(pat, sizeof pat, "%s/base.lp.tmp.*", DIR);
    int rc = interrupt_when(pat, SIGINT, "perplexity -m %s -f %s -c 128 --chunks 200 --save-logits %s/base.lp", MODEL,
                            TEXT, DIR);
    CHECK(rc == 130, "SIGINT during --save-logits: exit %d %s", rc, ERR);
    CHECK(leftovers("base.lp") == 0, "--save-logits left a file after SIGINT");
    CHECK(strstr(ERR, "interrupted"), "no message on SIGINT: %s", ERR);
    snprintf(pat, sizeof pat, "%s/q.gguf.tmp.*", DIR);
    rc = interrupt_when(pat, SIGTERM, "quantize %s %s/q.gguf q8_0", MODEL, DIR);
    CHECK(rc == 143, "SIGTERM during quantize: exit %d %s", rc, ERR);
    CHECK(leftovers("q.gguf") == 0, "quantize left a file after SIGTERM");
}

TEST(ctrl_c_stops_run_and_prints_statistics) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    char stdout_file[128];
    snprintf(stdout_file, sizeof stdout_file, "%s/stdout", DIR);
    /* the prompt is echoed first: once stdout is not empty, generation is under way */
    char cmd[4096], out[64];
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'Once upon a time' -n 100000 -c 32768 --ignore-eos -t 1 >%s 2>%s/stderr </dev/null & "
             "pid=$!; for i in $(seq 6000); do [ -s %s ] && break; sleep 0.01; done; sleep 0.3; "
             "kill -INT $pid; wait $pid; echo $?",
             BIN, MODEL, stdout_file, DIR, stdout_file);
    test_sh(cmd, out, sizeof out);
    char e[128];
    snprintf(e, sizeof e, "%s/stderr", DIR);
    slurp(e, ERR, sizeof ERR);
    slurp(stdout_file, OUT, sizeof OUT);
    CHECK(atoi(out) == 130, "exit %s after Ctrl-C, want 130: %s", out, ERR);
    CHECK(strstr(ERR, "generation:") && strstr(ERR, "peak memory:"), "no statistics after Ctrl-C: %s", ERR);
    size_t n = strlen(OUT);
    CHECK(n > 0 && OUT[n - 1] == '\n', "the text does not end in a newline");
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
    snprintf(in, sizeof in, "%s/turns.txt", DIR);
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
    snprintf(in, sizeof in, "%s/turn.txt", DIR);
    FILE *f = fopen(in, "w");
    fputs("Count to a thousand.\n", f);
    fclose(f);
    int rc = cli("run -m %s --chat -c 2048 --ignore-eos --temp 0 -t 2 < %s", MODEL, in);
    CHECK(rc == 0 && stat_count("generation:") == 1024, "one reply without -n: exit %d %s", rc, ERR);
}

TEST(plural_and_one_prefix) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    char path[128];
    snprintf(path, sizeof path, "%s/empty.txt", DIR);
    FILE *f = fopen(path, "w");
    fclose(f);
    int rc = cli("imatrix -m %s -f %s -o %s/im.gguf", MODEL, path, DIR);
    CHECK(rc == 1 && strstr(ERR, "holds 1 token,"), "imatrix on an empty text: exit %d %s", rc, ERR);
    snprintf(path, sizeof path, "%s/short.txt", DIR);
    f = fopen(path, "w");
    fputs("A few words only.", f);
    fclose(f);
    rc = cli("perplexity -m %s -f %s", MODEL, path);
    CHECK(rc == 1 && strstr(ERR, "nibble perplexity: the text is 6 tokens;") && !strstr(ERR, "perplexity: perplexity"),
          "one prefix: exit %d %s", rc, ERR);
}

int main(int argc, char **argv) {
    (void)argc;
    test_nibble_bin(argv[0], BIN, sizeof BIN);
    snprintf(DIR, sizeof DIR, "/tmp/nb_cli_XXXXXX");
    if (!mkdtemp(DIR)) return 1;
    RUN(help_prints_usage_once_to_stdout);
    RUN(bad_usage_says_what_before_the_usage);
    RUN(threads_accepts_what_the_pool_accepts);
    RUN(same_error_same_code);
    RUN(llama_cpp_spellings);
    RUN(long_prompt_is_refused_before_it_is_echoed);
    RUN(text_output_escapes_control_bytes);
    RUN(svg_to_standard_output);
    RUN(quantize_output_is_never_clobbered);
    RUN(interrupted_writes_leave_no_temporary_file);
    RUN(ctrl_c_stops_run_and_prints_statistics);
    RUN(chat_bounds_its_input_lines);
    RUN(chat_goes_on_when_the_context_fills);
    RUN(chat_reply_stops_at_the_default_per_turn);
    RUN(plural_and_one_prefix);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", DIR);
    if (system(cmd)) printf("could not remove %s\n", DIR);
    return test_summary();
}
