/*
 * test_run.c: the runtime through its public API and the `nibble run` command on the default
 * model: thread-count invariance of sampled text, context limits, chat turns, bad input.
 * Skips (saying so) when the model is absent; `make test` fetches it first.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nibble.h"
#include "test.h"

static const char *MODEL = "models/gemma-3-270m-q4_k_m.gguf";
static char BIN[256]; /* the nibble next to this test program */

static int have_model(void) { return access(MODEL, R_OK) == 0; }

TEST(same_seed_same_text_any_thread_count) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    static char a[8192], b[8192], c[8192];
    char cmd[1024];
    const char *args = "-p 'The robot picked up the brush and' -n 24 --seed 7 2>/dev/null";
    snprintf(cmd, sizeof cmd, "%s run -m %s -t 1 %s", BIN, MODEL, args);
    CHECK(test_sh(cmd, a, sizeof a) == 0, "run -t 1 failed");
    snprintf(cmd, sizeof cmd, "%s run -m %s -t 2 %s", BIN, MODEL, args);
    CHECK(test_sh(cmd, b, sizeof b) == 0, "run -t 2 failed");
    CHECK(!strcmp(a, b), "seeded text differs between 1 and 2 threads:\n%s\n---\n%s", a, b);
    snprintf(cmd, sizeof cmd, "%s run -m %s -t 2 -p 'The robot picked up the brush and' -n 24 --seed 8 2>/dev/null",
             BIN, MODEL);
    CHECK(test_sh(cmd, c, sizeof c) == 0, "run --seed 8 failed");
    CHECK(strcmp(a, c) != 0, "seeds 7 and 8 gave the same 24 sampled tokens: %s", a);
    CHECK(strlen(a) > strlen("The robot picked up the brush and") + 10, "no text generated: %s", a);
}

TEST(prompt_longer_than_context_is_refused) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -c 8 -p 'one two three four five six seven eight nine ten eleven' -n 4 2>&1 >/dev/null", BIN,
             MODEL);
    int rc = test_sh(cmd, out, sizeof out);
    CHECK(rc == 1, "exit %d, want 1", rc);
    CHECK(strstr(out, "context") && strstr(out, "-c"), "message should name the context and -c: %s", out);
}

TEST(generation_stops_at_full_context) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "%s run -m %s -c 16 -p 'Once upon a time' -n 100 --ignore-eos --temp 0 2>&1 >/dev/null",
             BIN, MODEL);
    int rc = test_sh(cmd, out, sizeof out);
    CHECK(rc == 0, "exit %d", rc);
    CHECK(strstr(out, "context of 16 tokens is full") != NULL, "no full-context message: %s", out);
}

/* --context-shift: the same full context goes on past its end, shifting (said in the statistics),
 * for every cell type and both attention routes; quantized V cells with -fa off are refused by
 * name, exit 1. */
TEST(context_shift_goes_on) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    static const char *const cells[] = {"-ctk f16 -ctv f16 -fa off", "-ctk f16 -ctv f16 -fa on", "-ctk q8_0 -ctv q8_0",
                                        "-ctk q4_0 -ctv q4_0", "-ctk bf16 -ctv f32 -fa on"};
    for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++) {
        char cmd[1024], out[4096];
        snprintf(cmd, sizeof cmd,
                 "%s run -m %s -c 32 %s -p 'Once upon a time' -n 80 --ignore-eos --temp 0 --context-shift --keep 2 "
                 "2>&1 >/dev/null", BIN, MODEL, cells[i]);
        const int rc = test_sh(cmd, out, sizeof out);
        CHECK(rc == 0 && strstr(out, "generation:") && strstr(out, " 80 tokens") && strstr(out, "context shifts:"),
              "%s: exit %d: %s", cells[i], rc, out);
        CHECK(!strstr(out, "is full"), "%s: stopped at the full context: %s", cells[i], out);
    }
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "%s run -m %s -ctv q8_0 -fa off -p 'Hello' -n 4 2>&1 >/dev/null", BIN, MODEL);
    const int rc = test_sh(cmd, out, sizeof out);
    CHECK(rc == 1 && strstr(out, "V cells of type q8_0") && strstr(out, "-fa on"), "exit %d: %s", rc, out);
}

/* Appends the ids of text (special tokens parsed) to buf as " id id ...". */
static void ids_of(const nb_model *m, const char *text, int add_bos, char *buf, size_t cap) {
    int32_t ids[256];
    size_t n = 0;
    nb_tokenize(nb_model_tokenizer(m), text, strlen(text), add_bos, 1, ids, 256, &n);
    for (size_t i = 0; i < n && i < 256; i++) snprintf(buf + strlen(buf), cap - strlen(buf), " %d", ids[i]);
}

/* Runs a two-line --chat with --verbose-prompt (cmd) and checks that each turn fed the ids of its
 * text: turn1 with BOS, turn2 after the first reply. */
static void expect_turns(const char *cmd, const char *turn1, const char *turn2) {
    nb_model *m;
    CHECK(nb_model_load(MODEL, &m) == NB_OK, "load: %s", nb_last_error());
    char want1[2048] = "", want2[2048] = "", out[8192];
    ids_of(m, turn1, 1, want1, sizeof want1);
    ids_of(m, turn2, 0, want2, sizeof want2);
    nb_model_free(m);
    int rc = test_sh(cmd, out, sizeof out);
    CHECK(rc == 0, "exit %d: %s", rc, out);
    char *l1 = strstr(out, "prompt tokens"), *l2 = l1 ? strstr(l1 + 1, "prompt tokens") : NULL;
    CHECK(l1 && l2, "two turns expected: %s", out);
    if (!l1 || !l2) return;
    *strchr(l1, '\n') = '\0';
    *strchr(l2, '\n') = '\0';
    CHECK(!strcmp(strchr(l1, ':') + 1, want1), "turn 1 ids\n%s\nwant\n%s", strchr(l1, ':') + 1, want1);
    CHECK(!strcmp(strchr(l2, ':') + 1, want2), "turn 2 ids\n%s\nwant\n%s", strchr(l2, ':') + 1, want2);
}

/* The default model is a base (not instruction-tuned) model, so its answers are not checked; the
 * turns are: Gemma's template, the system text and a blank line in front of the first user text,
 * each model turn closed before the next user turn, BOS only once. */
TEST(chat_turns_from_stdin) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "printf 'What is the capital of France?\\n\\nAnd of Italy?\\n' | %s run -m %s --chat --temp 0 -n 8 "
             "--system 'Be brief.' --verbose-prompt 2>&1 >/dev/null",
             BIN, MODEL);
    expect_turns(cmd, "<start_of_turn>user\nBe brief.\n\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
                 "<end_of_turn>\n<start_of_turn>user\nAnd of Italy?<end_of_turn>\n<start_of_turn>model\n");
}

/* --chat-template: llama.cpp's chatml in place of the file's gemma; the second turn follows the
 * first reply with the template's text after a reply (its end-of-turn written, not fed). */
TEST(chat_template_flag) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    char cmd[1024], out[8192];
    snprintf(cmd, sizeof cmd,
             "printf 'Hi there\\nAnd now?\\n' | %s run -m %s --chat --chat-template chatml --temp 0 -n 4 "
             "--system 'Be brief.' --verbose-prompt 2>&1 >/dev/null", BIN, MODEL);
    expect_turns(cmd, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
                 "<|im_end|>\n<|im_start|>user\nAnd now?<|im_end|>\n<|im_start|>assistant\n");
    snprintf(cmd, sizeof cmd, "%s run -m %s --chat --chat-template gemma3 < /dev/null 2>&1", BIN, MODEL);
    int rc = test_sh(cmd, out, sizeof out);
    CHECK(rc == 2 && strstr(out, "'gemma3' is none of") && strstr(out, "llama3") && strstr(out, "chatml"),
          "an unknown name: exit %d %s", rc, out);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p hi --chat-template chatml 2>&1", BIN, MODEL);
    CHECK(test_sh(cmd, out, sizeof out) == 2 && strstr(out, "add --chat"), "--chat-template without --chat: %s", out);
}

/* -r: generation stops at the reverse prompt, which is not printed, even across tokens. */
TEST(reverse_prompt_stops_generation) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    static char all[8192], cut[8192];
    char cmd[1024], stop[16];
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'The robot picked up the brush and' -n 24 --temp 0 2>/dev/null", BIN, MODEL);
    CHECK(test_sh(cmd, all, sizeof all) == 0, "run failed");
    const size_t base = strlen("The robot picked up the brush and"), n = strlen(all);
    CHECK(n > base + 20, "too little text: %s", all);
    if (n <= base + 20) return;
    memcpy(stop, all + base + 10, 5); /* 5 letters from the middle of the reply */
    stop[5] = '\0';
    CHECK(!strchr(stop, '\'') && !strchr(stop, '\\'), "a stop string the shell quotes plainly: %s", stop);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'The robot picked up the brush and' -n 24 --temp 0 -r '%s' 2>/dev/null",
             BIN, MODEL, stop);
    CHECK(test_sh(cmd, cut, sizeof cut) == 0, "run -r failed");
    const size_t at = (size_t)(strstr(all + base, stop) - all);
    CHECK(strlen(cut) == at + 1 && !strncmp(cut, all, at) && cut[at] == '\n', "-r '%s':\n%s\nwant the text before it of\n%s",
          stop, cut, all);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p hi -r '' 2>&1", BIN, MODEL);
    CHECK(test_sh(cmd, cut, sizeof cut) == 2, "an empty -r: %s", cut);
}

TEST(bad_flags_exit_2) {
    char cmd[1024], out[4096];
    const char *bad[] = {"--temp x", "-n", "--top-p 2", "-c -1", "--bogus", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s run -m %s -p hi %s 2>&1", BIN, MODEL, bad[i]);
        if (!*bad[i]) snprintf(cmd, sizeof cmd, "%s run -p hi 2>&1", BIN); /* no -m */
        int rc = test_sh(cmd, out, sizeof out);
        CHECK(rc == 2, "'%s' exited %d, want 2 (%s)", bad[i], rc, out);
    }
    snprintf(cmd, sizeof cmd, "%s run -m /nonexistent.gguf -p hi 2>&1", BIN);
    CHECK(test_sh(cmd, out, sizeof out) == 1 && strstr(out, "/nonexistent.gguf"), "missing model: %s", out);
}

/* `bench roofline`: one row per thread count with the bytes a step reads (the weights the graph
 * uses plus the keys and values attended to) and a share of the ceiling that is a measurement
 * (positive and finite, not a constant); bad flags exit 2. */
TEST(bench_roofline_row) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "%s bench roofline -m %s -t 1 -n 4 -r 1 2>&1", BIN, MODEL);
    CHECK(test_sh(cmd, out, sizeof out) == 0, "roofline failed: %s", out);
    const char *row = strstr(out, "\n| 1 | ");
    double gbs, tps, mb, ceil, share;
    CHECK(row && sscanf(row, "\n| 1 | %lf ± %*f | %lf ± %*f | %lf | %lf ± %*f | %lf %%", &gbs, &tps, &mb, &ceil, &share) == 5,
          "no 1-thread row in:\n%s", out);
    if (!row) return;
    nb_model *m;
    CHECK(nb_model_load(MODEL, &m) == NB_OK, "load: %s", nb_last_error());
    const double weights = (double)nb_model_get_info(m)->weight_bytes / 1e6;
    nb_model_free(m);
    CHECK(mb > weights && mb < weights + 1.0, "%.1f MB per step, weights %.1f MB (+ under 1 MB of KV)", mb, weights);
    CHECK(gbs > 0 && tps > 0 && share > 0 && isfinite(share), "stream %.1f GB/s, %.1f tok/s, share %.0f %%", gbs, tps, share);
    CHECK(fabs(ceil - gbs * 1e3 / mb) < 0.05 * ceil + 0.1, "ceiling %.1f is not stream/bytes %.1f", ceil, gbs * 1e3 / mb);
    snprintf(cmd, sizeof cmd, "%s bench roofline -t 1 2>&1", BIN);
    CHECK(test_sh(cmd, out, sizeof out) == 2, "no -m: %s", out);
}

/* n tokens' logits (all rows) of a fresh context with fast_prefill f on t threads, or NULL. */
static float *prefill_logits(nb_model *m, const int32_t *toks, int n, int f, int t) {
    nb_ctx_params p = nb_ctx_default_params();
    p.n_ctx = 256, p.n_threads = t, p.fast_prefill = f;
    nb_ctx *c;
    if (nb_ctx_create(m, &p, &c)) return NULL;
    float *lg = malloc(sizeof(float) * (size_t)nb_model_get_info(m)->n_vocab * (size_t)n);
    if (lg && nb_ctx_eval(c, toks, n, lg, 1)) free(lg), lg = NULL;
    nb_ctx_free(c);
    return lg;
}

/* fast_prefill (NB_ROUTE_BLOCK) on the default model's Q5_0, Q8_0 and Q4_K products: other bits than
 * llama.cpp's order, and distributions as close to its as a batch's are to one-by-one decoding
 * (api_eval_limits_and_logits: a changed rounding flips some 8-bit activation codes downstream,
 * which a float difference alone would not); no bit depends on the thread count. The prompt is
 * one prefill batch of English text. */
TEST(fast_prefill_close_to_exact) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    nb_model *m;
    CHECK(nb_model_load(MODEL, &m) == NB_OK, "load: %s", nb_last_error());
    static const char text[] =
        "The workshop was quiet after the last shift. A small robot rolled between the benches, checking each "
        "drawer of screws and counting the brushes that the painters had left to dry. It had learned that the "
        "painters preferred their brushes clean, so it carried them one by one to the sink, washed them in warm "
        "water and laid them on a towel by the window, where the morning sun would reach them first.";
    int32_t toks[256];
    size_t n = 0;
    CHECK(nb_tokenize(nb_model_tokenizer(m), text, strlen(text), 1, 1, toks, 256, &n) == NB_OK && n > 64 && n < 256,
          "tokenize: %zu tokens: %s", n, nb_last_error());
    const int N = (int)n;
    const int n_vocab = nb_model_get_info(m)->n_vocab;
    float *exact = prefill_logits(m, toks, N, 0, 2), *fast = prefill_logits(m, toks, N, 1, 2), *one = prefill_logits(m, toks, N, 1, 1);
    CHECK(exact && fast && one, "prefill: %s", nb_last_error());
    if (exact && fast && one) {
        const size_t bytes = sizeof(float) * (size_t)n_vocab * (size_t)N;
        CHECK(memcmp(exact, fast, bytes), "fast_prefill gave llama.cpp's bits: the block route was not taken");
        CHECK(!memcmp(fast, one, bytes), "fast_prefill: 1 and 2 threads differ");
        double worst = 0, sum = 0;
        int same = 0;
        for (int i = 0; i < N; i++) {
            int st;
            const double kl = test_kl(exact + (size_t)i * n_vocab, fast + (size_t)i * n_vocab, n_vocab, &st);
            worst = fmax(worst, kl), sum += kl, same += st;
        }
        printf("fast_prefill against llama.cpp's order, %d positions: KL mean %.2e, max %.2e, same top %d\n", N, sum / N,
               worst, same);
        CHECK(sum / N < 0.01 && worst < 0.05 && same >= N * 9 / 10, "fast_prefill: KL mean %g, max %g, same top token at %d of %d",
              sum / N, worst, same, N);
    }
    free(exact), free(fast), free(one);
    nb_model_free(m);
}

TEST(api_eval_limits_and_logits) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    nb_model *m;
    CHECK(nb_model_load(MODEL, &m) == NB_OK, "load: %s", nb_last_error());
    nb_ctx_params p = nb_ctx_default_params();
    p.n_ctx = 8;
    p.n_threads = 2;
    nb_ctx *c;
    CHECK(nb_ctx_create(m, &p, &c) == NB_OK, "ctx: %s", nb_last_error());
    const int n_vocab = nb_model_get_info(m)->n_vocab;
    float *logits = malloc(sizeof(float) * (size_t)n_vocab * 8);
    int32_t toks[9] = {2, 818, 5279, 529, 7001, 563, 506, 5279, 529};
    CHECK(nb_ctx_eval(c, toks, 9, logits, 0) == NB_ERR_RANGE, "9 tokens into a context of 8 must be refused");
    CHECK(nb_ctx_pos(c) == 0, "a refused eval changes nothing");
    int32_t bad = n_vocab;
    CHECK(nb_ctx_eval(c, &bad, 1, logits, 0) == NB_ERR_RANGE && strstr(nb_last_error(), "vocabulary"),
          "a token outside the vocabulary: %s", nb_last_error());
    /* all logits of 4 tokens in one call against the same tokens fed one by one: as in llama.cpp,
     * a batch sums in its own orders (kernels.h), so the two are the same distributions up to
     * 8-bit quantization noise, not the same bits */
    CHECK(nb_ctx_eval(c, toks, 4, logits, 1) == NB_OK, "eval: %s", nb_last_error());
    nb_ctx_reset(c);
    float *one = malloc(sizeof(float) * (size_t)n_vocab);
    for (int i = 0; i < 4; i++) {
        CHECK(nb_ctx_eval(c, toks + i, 1, one, 0) == NB_OK, "eval one: %s", nb_last_error());
        int same;
        const double kl = test_kl(logits + (size_t)i * n_vocab, one, n_vocab, &same);
        printf("position %d: KL(batch || one by one) %.2e, same top %d\n", i, kl, same);
        CHECK(same && kl < 0.02, "position %d: batched and one-by-one differ: KL %g, same top %d", i, kl, same);
    }
    free(one);
    free(logits);
    nb_ctx_free(c);
    nb_model_free(m);
}

/* `nibble imatrix --process-output` adds the output matrix (Gemma's tied embedding) and leaves
 * every other matrix's statistics bit for bit as without it (the chunk is evaluated in slices). */
TEST(imatrix_process_output) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    char dir[] = "/tmp/nb_imatrix_XXXXXX", cmd[2048], out[4096];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char text[256], with[256], without[256];
    snprintf(text, sizeof text, "%s/text.txt", dir);
    snprintf(with, sizeof with, "%s/with.gguf", dir);
    snprintf(without, sizeof without, "%s/without.gguf", dir);
    FILE *f = fopen(text, "w");
    CHECK(f != NULL, "text file");
    for (int i = 0; i < 40; i++) fprintf(f, "Line %d: the robot mixes blue and white paint and waits for the morning light.\n", i);
    fclose(f);
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "%s imatrix -m %s -f %s -o %s -c 128 --chunks 2 -t 2%s 2>&1", BIN, MODEL, text,
                 k ? with : without, k ? " --process-output" : "");
        CHECK(test_sh(cmd, out, sizeof out) == 0, "imatrix failed: %s", out);
    }
    nb_imatrix *a = NULL, *b = NULL;
    CHECK(nb_imatrix_load(with, &a) == NB_OK && nb_imatrix_load(without, &b) == NB_OK, "load: %s", nb_last_error());
    int64_t n = 0, n2 = 0;
    const float *emb = nb_imatrix_find(a, "token_embd.weight", &n);
    CHECK(emb && n == 640, "with --process-output: token_embd.weight has %lld columns", (long long)n);
    CHECK(nb_imatrix_find(b, "token_embd.weight", &n) == NULL, "without it the output matrix is left out");
    CHECK(nb_imatrix_count(a) == nb_imatrix_count(b) + 1, "%lld vs %lld matrices", (long long)nb_imatrix_count(a),
          (long long)nb_imatrix_count(b));
    const float *qa = nb_imatrix_find(a, "blk.7.ffn_down.weight", &n), *qb = nb_imatrix_find(b, "blk.7.ffn_down.weight", &n2);
    CHECK(qa && qb && n == n2 && !memcmp(qa, qb, sizeof(float) * (size_t)n), "blk.7.ffn_down statistics differ");
    double sum = 0;
    for (int64_t i = 0; emb && i < 640; i++) sum += emb[i];
    CHECK(sum > 0 && isfinite(sum), "output importance sum %g", sum);
    nb_imatrix_free(a);
    nb_imatrix_free(b);
    remove(text), remove(with), remove(without), rmdir(dir);
}

/* nb_imatrix_collect on its own: the chunks it is asked for, progress after each, the context's
 * observer removed afterwards (checked under make asan), and refusals of chunks the text or the
 * context cannot hold. */
static void count_chunk(void *user, int done, int n) { *(int *)user = done == n ? done : -1; }

TEST(imatrix_collect) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    nb_model *m = NULL;
    nb_ctx *c = NULL;
    nb_imatrix *im = NULL;
    nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = 32;
    CHECK(nb_model_load(MODEL, &m) == NB_OK && nb_ctx_create(m, &cp, &c) == NB_OK && nb_imatrix_create(&im) == NB_OK,
          "%s", nb_last_error());
    if (!im) return;
    int32_t ids[70];
    for (int i = 0; i < 70; i++) ids[i] = 1000 + 7 * i;
    int last = 0;
    nb_imatrix_params p = {32, 2, 0, count_chunk, &last};
    CHECK(nb_imatrix_collect(c, im, ids, 70, &p) == NB_OK && last == 2 && nb_imatrix_count(im) > 0 &&
              !nb_imatrix_find(im, "token_embd.weight", NULL),
          "collect: %s, last progress %d, %lld matrices", nb_last_error(), last, (long long)nb_imatrix_count(im));
    nb_imatrix_free(im); /* an observer left on the context would now write freed memory (make asan) */
    nb_ctx_reset(c);
    CHECK(nb_ctx_eval(c, ids, 1, NULL, 0) == NB_OK && nb_imatrix_create(&im) == NB_OK, "%s", nb_last_error());
    p.n_chunks = 3;
    CHECK(nb_imatrix_collect(c, im, ids, 70, &p) == NB_ERR_INVALID_ARG, "3 chunks of 32 from 70 tokens");
    p.n_chunks = 1, p.n_ctx = 33;
    CHECK(nb_imatrix_collect(c, im, ids, 70, &p) == NB_ERR_INVALID_ARG, "a chunk longer than the context");
    nb_imatrix_free(im);
    nb_ctx_free(c);
    nb_model_free(m);
}

TEST(unknown_architecture_refused_by_name) {
    nb_gguf_writer *w;
    CHECK(nb_gguf_writer_create(&w) == NB_OK, "writer");
    nb_gguf_writer_set_string(w, "general.architecture", "mamba9");
    const char *path = "models/.test_run_arch.gguf";
    CHECK(nb_gguf_writer_write(w, path) == NB_OK, "write: %s", nb_last_error());
    nb_gguf_writer_free(w);
    nb_model *m = NULL;
    nb_status s = nb_model_load(path, &m);
    CHECK(s == NB_ERR_UNSUPPORTED && strstr(nb_last_error(), "mamba9"), "got %d: %s", s, nb_last_error());
    remove(path);
}

/* llama-cli's -cnv -p: the prompt is the first user turn and the input's lines follow (the system
 * text from -sys or from a file, -sysf); -st ends the conversation after one reply (the prompt's,
 * or the first line's); a first turn that does not fit the context fails (an input line that does
 * not is skipped). */
TEST(chat_first_turn_from_prompt) {
    if (!have_model()) SKIP("model %s absent", MODEL);
    char cmd[1024], out[8192], sysf[] = "/tmp/nb_sysf_XXXXXX";
    const int fd = mkstemp(sysf);
    CHECK(fd >= 0 && write(fd, "Be brief.\n", 10) == 10, "mkstemp");
    if (fd >= 0) close(fd);
    static const char *const sys[] = {"--system 'Be brief.'", "-sysf "};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd,
                 "printf 'And of Italy?\\n' | %s run -m %s --chat -p 'What is the capital of France?' --temp 0 -n 8 "
                 "%s%s --verbose-prompt 2>&1 >/dev/null",
                 BIN, MODEL, sys[i], i ? sysf : "");
        expect_turns(cmd,
                     "<start_of_turn>user\nBe brief.\n\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
                     "<end_of_turn>\n<start_of_turn>user\nAnd of Italy?<end_of_turn>\n<start_of_turn>model\n");
    }
    remove(sysf);
    static const char *const single[] = {"-p 'What is the capital of France?'", ""};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd,
                 "printf '\\nAnd of Italy?\\nAnd of Spain?\\n' | %s run -m %s --chat -st %s --temp 0 -n 4 "
                 "--verbose-prompt 2>&1 >/dev/null",
                 BIN, MODEL, single[i]);
        int rc = test_sh(cmd, out, sizeof out);
        const char *l1 = strstr(out, "prompt tokens");
        CHECK(rc == 0 && l1 && !strstr(l1 + 1, "prompt tokens"), "-st %s: one turn expected, exit %d: %s", single[i], rc,
              out);
    }
    snprintf(cmd, sizeof cmd, "%s run -m %s --chat -c 32 -p \"$(printf 'word %%.0s' $(seq 64))\" < /dev/null 2>&1",
             BIN, MODEL);
    int rc = test_sh(cmd, out, sizeof out);
    CHECK(rc == 1 && strstr(out, "context of 32"), "a first turn longer than the context: exit %d: %s", rc, out);
    snprintf(cmd, sizeof cmd, "printf 'a\\000b\\nHi\\n' | %s run -m %s --chat -st -n 2 --verbose-prompt 2>&1 >/dev/null",
             BIN, MODEL);
    rc = test_sh(cmd, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "NUL byte: the line was skipped") && strstr(out, "prompt tokens"),
          "an input line with a NUL byte: exit %d: %s", rc, out);
}

int main(int argc, char **argv) {
    (void)argc;
    test_nibble_bin(argv[0], BIN, sizeof BIN);
    RUN(same_seed_same_text_any_thread_count);
    RUN(prompt_longer_than_context_is_refused);
    RUN(generation_stops_at_full_context);
    RUN(context_shift_goes_on);
    RUN(chat_turns_from_stdin);
    RUN(chat_template_flag);
    RUN(chat_first_turn_from_prompt);
    RUN(reverse_prompt_stops_generation);
    RUN(bad_flags_exit_2);
    RUN(bench_roofline_row);
    RUN(api_eval_limits_and_logits);
    RUN(fast_prefill_close_to_exact);
    RUN(imatrix_process_output);
    RUN(imatrix_collect);
    RUN(unknown_architecture_refused_by_name);
    return test_summary();
}
