/*
 * test_chat.c: chat templates (detection of llama.cpp's template files and of the llama2 /
 * mistral variants, rendering, bounds, the unknown-template error) and the generation state
 * machine on a small made-up vocabulary whose logits the test chooses (stop strings across tokens,
 * held-back text, UTF-8 split across tokens, end of generation, n_predict, a full context,
 * cancellation), then nb_generate and a conversation (nb_conv) on the default model (skipped when
 * absent).
 * The template files come from the llama.cpp tree scripts/fetch-llama-src.sh unpacks ("skipped"
 * when absent).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nibble.h"
#include "test.h"

static const char *MODEL = "models/gemma-3-270m-q4_k_m.gguf";

/* ------------------------------------------------------------- templates */

static int id_of(const char *name) { return nb_chat_template_find(name); }

/* The template detected in text, by name ("?" when none). */
static const char *detected(const char *text, size_t len) {
    int id;
    return nb_chat_detect(text, len, &id) == NB_OK ? nb_chat_template_name(id) : "?";
}

/* The templates directory of the llama.cpp tree (version from tests/parity/requirements.txt). */
static int templates_dir(char *dir, size_t cap) {
    FILE *f = fopen("tests/parity/requirements.txt", "r");
    char line[256], ver[64] = "";
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "llama-cpp-python==%63s", ver) == 1) break;
    if (f) fclose(f);
    snprintf(dir, cap, "build/llama-src/llama_cpp_python-%s/vendor/llama.cpp/models/templates", ver);
    return *ver && access(dir, R_OK) == 0;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    *len = buf ? fread(buf, 1, (size_t)n, f) : 0;
    if (buf) buf[*len] = '\0';
    fclose(f);
    return buf;
}

/* Every file of the pinned llama.cpp's models/templates, with the template llama.cpp's
 * llm_chat_detect_template picks ("?": none, and nibble must refuse it too);
 * tests/parity/test_chat_template.py checks the same against llama.cpp itself. */
static const char *const FILES[][2] = {
    {"Apertus-8B-Instruct", "?"},
    {"Apriel-1.6-15b-Thinker-fixed", "?"},
    {"Bielik-11B-v3.0-Instruct", "chatml"},
    {"ByteDance-Seed-OSS", "seed_oss"},
    {"Cohere2MoE", "command-r"},
    {"CohereForAI-c4ai-command-r-plus-tool_use", "command-r"},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", "command-r"},
    {"GLM-4.6", "chatglm4"},
    {"GLM-4.7-Flash", "chatglm4"},
    {"GigaChat3-10B-A1.8B", "?"},
    {"GigaChat3.1-10B-A1.8B", "?"},
    {"HuggingFaceTB-SmolLM3-3B", "chatml"},
    {"Kimi-K2-Instruct", "kimi-k2"},
    {"Kimi-K2-Thinking", "kimi-k2"},
    {"Kimi-K3", "?"},
    {"LFM2-8B-A1B", "chatml"},
    {"LFM2.5-8B-A1B", "chatml"},
    {"LFM2.5-Instruct", "chatml"},
    {"MiMo-VL", "chatml"},
    {"MiniMax-M1", "?"},
    {"MiniMax-M2", "?"},
    {"MiniMax-M3", "?"},
    {"Mistral-Small-3.2-24B-Instruct-2506", "mistral-v7"},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "chatml"},
    {"NVIDIA-Nemotron-Nano-v2", "?"},
    {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", "chatml"},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "chatml"},
    {"Qwen-QwQ-32B", "chatml"},
    {"Qwen-Qwen2.5-7B-Instruct", "chatml"},
    {"Qwen-Qwen3-0.6B", "chatml"},
    {"Qwen3-Coder", "chatml"},
    {"Qwen3.5-4B", "chatml"},
    {"Reka-Edge", "?"},
    {"Spark2.5", "?"},
    {"StepFun3.5-Flash", "chatml"},
    {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "deepseek3"},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "deepseek3"},
    {"deepseek-ai-DeepSeek-V3.1", "deepseek3"},
    {"deepseek-ai-DeepSeek-V3.2", "deepseek3"},
    {"deepseek-ai-DeepSeek-V4-Flash-0731", "deepseek3"},
    {"deepseek-ai-DeepSeek-V4", "deepseek3"},
    {"fireworks-ai-llama-3-firefunction-v2", "llama3"},
    {"google-gemma-2-2b-it", "gemma"},
    {"google-gemma-4-31B-it-interleaved", "?"},
    {"google-gemma-4-31B-it", "?"},
    {"ibm-granite-granite-3.3-2B-Instruct", "granite"},
    {"ibm-granite-granite-4.0", "granite-4.0"},
    {"ibm-granite-granite-4.1", "granite-4.1"},
    {"inclusionai-ling-3.0-flash", "bailing2"},
    {"llama-cpp-deepseek-r1", "deepseek3"},
    {"llama-cpp-rwkv-world", "rwkv-world"},
    {"meetkai-functionary-medium-v3.1", "llama3"},
    {"meetkai-functionary-medium-v3.2", "llama3"},
    {"meta-llama-Llama-3.1-8B-Instruct", "llama3"},
    {"meta-llama-Llama-3.2-3B-Instruct", "llama3"},
    {"meta-llama-Llama-3.3-70B-Instruct", "llama3"},
    {"microsoft-Phi-3.5-mini-instruct", "phi3"},
    {"mistralai-Ministral-3-14B-Reasoning-2512", "mistral-v7"},
    {"mistralai-Mistral-Nemo-Instruct-2407", "mistral-v3-tekken"},
    {"moonshotai-Kimi-K2", "kimi-k2"},
    {"muse-glimmer", "?"},
    {"openai-gpt-oss-120b", "gpt-oss"},
    {"openbmb-MiniCPM5-1B", "chatml"},
    {"poolside-Laguna-S-2.1", "?"},
    {"poolside-Laguna-XS-2.1", "?"},
    {"poolside-Laguna-XS.2", "?"},
    {"tencent-Hy3", "?"},
    {"unsloth-Apriel-1.5", "phi3"},
    {"unsloth-mistral-Devstral-Small-2507", "mistral-v7"},
    {"upstage-Solar-Open-100B", "solar-open"},
};

TEST(detects_llama_cpp_template_files) {
    char dir[512];
    if (!templates_dir(dir, sizeof dir)) SKIP("no llama.cpp tree at %s (scripts/fetch-llama-src.sh unpacks it)", dir);
    int n = 0;
    for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) {
        char path[1024];
        size_t len;
        snprintf(path, sizeof path, "%s/%s.jinja", dir, FILES[i][0]);
        char *text = slurp(path, &len);
        CHECK(text != NULL, "cannot read %s", path);
        if (!text) continue;
        const char *got = detected(text, len);
        CHECK(!strcmp(got, FILES[i][1]), "%s: detected %s, llama.cpp's is %s", FILES[i][0], got, FILES[i][1]);
        if (!strcmp(FILES[i][1], "?")) {
            int id;
            CHECK(nb_chat_detect(text, len, &id) == NB_ERR_UNSUPPORTED && strstr(nb_last_error(), "gemma, ") &&
                      strstr(nb_last_error(), "llama3") && id == -1,
                  "%s: an unknown template's error names the known ones: %s", FILES[i][0], nb_last_error());
        }
        free(text);
        n++;
    }
    printf("%d template files\n", n);
    DIR *d = opendir(dir);
    int unlisted = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        const size_t len = strlen(e->d_name);
        int listed = len < 6 || strcmp(e->d_name + len - 6, ".jinja");
        for (size_t i = 0; !listed && i < sizeof FILES / sizeof FILES[0]; i++)
            listed = strlen(FILES[i][0]) == len - 6 && !strncmp(e->d_name, FILES[i][0], len - 6);
        unlisted += !listed;
    }
    if (d) closedir(d);
    if (unlisted) printf("note: %d template files are not in the table (another llama.cpp?)\n", unlisted);
}

/* llama.cpp's llama2 / mistral variants, told apart by the strings their files use. */
TEST(detects_llama2_and_mistral_variants) {
    static const char *const CASES[][2] = {
        {"{% for m in messages %}{{ bos_token + '[INST] ' + m['content'] + ' [/INST]' }}{% endfor %}", "llama2-sys-bos"},
        {"{{ '[INST] ' + content + ' [/INST]' }}", "llama2"},
        {"{{ '<<SYS>>\\n' + system }}{{ '[INST] ' + content }}", "llama2-sys"},
        {"{{ bos_token + '[INST] ' + content.strip() }}<<SYS>>", "llama2-sys-strip"},
        {"{{ '<<SYS>>' }}{{ bos_token + '[INST] ' }}", "llama2-sys-bos"},
        {"{{ bos_token }}{{ ' [INST] ' + system_message }}", "mistral-v1"},
        {"{{ '[AVAILABLE_TOOLS]' }}{{ '[INST] ' + content }}", "mistral-v3"},
        {"{{ '[AVAILABLE_TOOLS]' }}{{ \"[INST]\" + content }}", "mistral-v3-tekken"},
        {"{{ '[SYSTEM_PROMPT]' + s + '[/SYSTEM_PROMPT]' }}{{ '[INST]' }}", "mistral-v7"},
        {"mistral-ish text without markers", "llama2"},
        {"<|im_start|>{{ role }}<|im_sep|>", "phi4"},
        {"<|im_start|>User:<end_of_utterance>", "smolvlm"},
        {"{{ '<start_of_turn>' + role }}", "gemma"},
        {"<|start_header_id|>x<|end_header_id|>", "llama3"},
        {"<|user|>\n{{ c }}<|end|>\n<|assistant|>", "phi3"},
        {"chatml", "chatml"},   /* a name stands for itself */
        {"gemma", "gemma"},
        {"{{ messages }}", "?"},
        {"", "?"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const char *got = detected(CASES[i][0], strlen(CASES[i][0]));
        CHECK(!strcmp(got, CASES[i][1]), "'%s': detected %s, want %s", CASES[i][0], got, CASES[i][1]);
    }
    /* text with NUL bytes is searched whole */
    static const char nul[] = "x\0<start_of_turn>";
    CHECK(!strcmp(detected(nul, sizeof nul - 1), "gemma"), "a NUL byte hides the rest");
}

/* The template's text of msgs, into a static buffer ("" on failure). */
static const char *apply(const char *name, const nb_chat_msg *m, size_t n, int add_ass) {
    static char buf[4096];
    size_t len;
    nb_status s = nb_chat_apply(id_of(name), m, n, add_ass, buf, sizeof buf - 1, &len);
    buf[s ? 0 : len] = '\0';
    return buf;
}

TEST(renders_as_llama_cpp) {
    const nb_chat_msg conv[] = {
        {"system", " Be brief. "}, {"user", " Hi "}, {"assistant", "Hello! "}, {"user", "Bye"},
    };
    static const char *const WANT[][3] = {
        {"gemma", "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
                  "<start_of_turn>user\nBye<end_of_turn>\n", "<start_of_turn>model\n"},
        {"chatml", "<|im_start|>system\n Be brief. <|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n<|im_start|>assistant\n"
                   "Hello! <|im_end|>\n<|im_start|>user\nBye<|im_end|>\n", "<|im_start|>assistant\n"},
        {"llama3", "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user"
                   "<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                   "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>",
         "<|start_header_id|>assistant<|end_header_id|>\n\n"},
        {"phi3", "<|system|>\n Be brief. <|end|>\n<|user|>\n Hi <|end|>\n<|assistant|>\nHello! <|end|>\n<|user|>\nBye<|end|>\n",
         "<|assistant|>\n"},
        {"llama2-sys", "[INST] <<SYS>>\n Be brief. \n<</SYS>>\n\n Hi  [/INST]Hello! </s>[INST] Bye [/INST]", ""},
        {"llama2", "[INST]  Be brief. \n Hi  [/INST]Hello! </s>[INST] Bye [/INST]", ""},
        {"mistral-v7", "[SYSTEM_PROMPT]  Be brief. [/SYSTEM_PROMPT][INST]  Hi [/INST] Hello! </s>[INST] Bye[/INST]", ""},
        {"mistral-v3", "[INST]  Be brief. \n\n Hi [/INST] Hello!</s>[INST] Bye[/INST]", ""},
    };
    for (size_t i = 0; i < sizeof WANT / sizeof WANT[0]; i++) {
        char want[2048];
        CHECK(!strcmp(apply(WANT[i][0], conv, 4, 0), WANT[i][1]), "%s without add_ass:\n%s\nwant\n%s", WANT[i][0],
              apply(WANT[i][0], conv, 4, 0), WANT[i][1]);
        snprintf(want, sizeof want, "%s%s", WANT[i][1], WANT[i][2]);
        CHECK(!strcmp(apply(WANT[i][0], conv, 4, 1), want), "%s with add_ass:\n%s\nwant\n%s", WANT[i][0],
              apply(WANT[i][0], conv, 4, 1), want);
    }
    /* gemma: a system text that trims to nothing adds no blank line; two system texts join */
    const nb_chat_msg two[] = {{"system", "A"}, {"system", " "}, {"system", "B"}, {"user", "u"}};
    CHECK(!strcmp(apply("gemma", two, 4, 0), "<start_of_turn>user\nAB\n\nu<end_of_turn>\n"), "gemma systems: %s",
          apply("gemma", two, 4, 0));
    CHECK(!strcmp(apply("gemma", NULL, 0, 1), "<start_of_turn>model\n"), "no messages: %s", apply("gemma", NULL, 0, 1));
    /* every template renders an empty conversation and a long one without failing */
    nb_chat_msg many[12];
    for (int i = 0; i < 12; i++) many[i] = (nb_chat_msg){i == 0 ? "system" : i % 2 ? "user" : "assistant", "x\xc3\xa9"};
    for (int t = 0; t < nb_chat_template_count(); t++) {
        size_t len;
        CHECK(nb_chat_apply(t, NULL, 0, 1, NULL, 0, &len) == NB_OK || len > 0, "%s: empty", nb_chat_template_name(t));
        nb_status s = nb_chat_apply(t, many, 12, 1, NULL, 0, &len);
        CHECK(s == NB_ERR_RANGE && len > 0, "%s: 12 messages: %d %zu", nb_chat_template_name(t), s, len);
    }
}

TEST(names_and_bounds) {
    const int n = nb_chat_template_count();
    CHECK(n >= 50, "%d templates", n);
    for (int i = 0; i < n; i++) {
        const char *name = nb_chat_template_name(i);
        CHECK(name && nb_chat_template_find(name) == i, "template %d", i);
        const char *list = nb_chat_template_list(), *at = strstr(list, name);
        CHECK(at && (at == list || at[-1] == ' '), "%s is not in the list", name);
    }
    CHECK(!nb_chat_template_name(-1) && !nb_chat_template_name(n) && nb_chat_template_find("gemma3") == -1 &&
              nb_chat_template_find(NULL) == -1, "out of range");
    const nb_chat_msg m[] = {{"user", "hello"}};
    char buf[8];
    size_t len;
    CHECK(nb_chat_apply(id_of("chatml"), m, 1, 1, buf, sizeof buf, &len) == NB_ERR_RANGE && len == 55 &&
              !memcmp(buf, "<|im_sta", 8), "a small buffer: the length and the first bytes (%zu)", len);
    CHECK(nb_chat_apply(n, m, 1, 1, buf, sizeof buf, &len) == NB_ERR_INVALID_ARG, "a bad id");
    CHECK(nb_chat_apply(0, m, NB_CHAT_MAX_MESSAGES + 1, 1, buf, sizeof buf, &len) == NB_ERR_RANGE &&
              strstr(nb_last_error(), "messages"), "too many messages: %s", nb_last_error());
    const nb_chat_msg bad[] = {{NULL, "x"}};
    CHECK(nb_chat_apply(0, bad, 1, 1, buf, sizeof buf, &len) == NB_ERR_INVALID_ARG, "a NULL role");
    int id;
    CHECK(nb_chat_detect("x", (size_t)NB_CHAT_MAX_TEMPLATE + 1, &id) == NB_ERR_RANGE && id == -1, "a huge template");
    /* a conversation over NB_CHAT_MAX_BYTES (one content of 2^27 bytes, three times) */
    char *big = malloc((1u << 27) + 1);
    CHECK(big != NULL, "malloc");
    if (!big) return;
    memset(big, 'a', 1u << 27);
    big[1u << 27] = '\0';
    const nb_chat_msg huge[] = {{"user", big}, {"assistant", big}, {"user", big}};
    CHECK(nb_chat_apply(0, huge, 3, 1, NULL, 0, &len) == NB_ERR_RANGE && strstr(nb_last_error(), "message 1"),
          "over the byte bound: %s", nb_last_error());
    free(big);
}

/* A file's template: its tokenizer.chat_template, else its architecture's own, else refused. */
static nb_status file_template(const char *arch, const char *tmpl, int as_u32, int *id) {
    const char *path = "/tmp/nb_test_chat.gguf";
    nb_gguf_writer *w;
    nb_gguf *g = NULL;
    if (nb_gguf_writer_create(&w)) return NB_ERR_NOMEM;
    if (arch) nb_gguf_writer_set_string(w, "general.architecture", arch);
    if (tmpl) nb_gguf_writer_set_string(w, "tokenizer.chat_template", tmpl);
    if (as_u32) nb_gguf_writer_set_u32(w, "tokenizer.chat_template", 7);
    nb_status s = nb_gguf_writer_write(w, path);
    nb_gguf_writer_free(w);
    if (!s && !(s = nb_gguf_open(path, &g))) s = nb_gguf_chat_template(g, id);
    nb_gguf_close(g);
    remove(path);
    return s;
}

TEST(template_of_a_file) {
    int id;
    CHECK(file_template("llama", "{{ '<|start_header_id|>' }}<|end_header_id|>", 0, &id) == NB_OK && id == id_of("llama3"),
          "llama3: %s", nb_last_error());
    CHECK(file_template("gemma3", NULL, 0, &id) == NB_OK && id == id_of("gemma"), "gemma3 without a template");
    CHECK(file_template("qwen3", NULL, 0, &id) == NB_OK && id == id_of("chatml"), "qwen3 without a template");
    CHECK(file_template("llama", NULL, 0, &id) == NB_ERR_UNSUPPORTED && id == -1 && strstr(nb_last_error(), "'llama'") &&
              strstr(nb_last_error(), "gemma, "), "llama without a template: %s", nb_last_error());
    CHECK(file_template(NULL, NULL, 0, &id) == NB_ERR_UNSUPPORTED, "no architecture, no template");
    CHECK(file_template("gemma3", "{{ messages }}", 0, &id) == NB_ERR_UNSUPPORTED && id == -1 &&
              strstr(nb_last_error(), "tokenizer.chat_template") && strstr(nb_last_error(), "chatml"),
          "an unknown template is refused even where the architecture has one: %s", nb_last_error());
    CHECK(file_template("gemma3", NULL, 1, &id) == NB_ERR_FORMAT, "a number for a template: %s", nb_last_error());
}

/* ---------------------------------------------------- generation, stepped */

/* A made-up vocabulary: the test picks each token by its logits (greedy sampler). */
static const char *const VOCAB[] = {
    "<unk>", "<s>", "</s>", "Hel", "lo", "\xe2\x96\x81wor", "ld", "<0xE2>", "<0x82>", "<0xAC>", "<end_of_turn>", "!", "STO", "P",
};
enum { V_UNK, V_BOS, V_EOS, V_HEL, V_LO, V_WOR, V_LD, V_E2, V_82, V_AC, V_EOT, V_BANG, V_STO, V_P, N_VOCAB };

static nb_tokenizer *tiny_vocab(void) {
    nb_token_text texts[N_VOCAB];
    int32_t types[N_VOCAB];
    for (int i = 0; i < N_VOCAB; i++) {
        texts[i] = (nb_token_text){VOCAB[i], strlen(VOCAB[i])};
        types[i] = i == V_UNK ? NB_TOKEN_UNKNOWN : i <= V_EOS || i == V_EOT ? NB_TOKEN_CONTROL
                   : i >= V_E2 && i <= V_AC ? NB_TOKEN_BYTE : NB_TOKEN_NORMAL;
    }
    nb_vocab_desc d = {.n_tokens = N_VOCAB, .texts = texts, .types = types, .bos_id = V_BOS, .eos_id = V_EOS,
                       .unk_id = V_UNK, .eot_id = V_EOT};
    nb_tokenizer *t = NULL;
    nb_tokenizer_create(&d, &t);
    return t;
}

typedef struct seq {
    nb_tokenizer *tok;
    nb_sampler *smp;
    nb_gen *g;
    char out[512]; /* every text released, joined */
    size_t n_out;
    int fed;       /* tokens the steps asked to feed */
} seq;

static int seq_open(seq *s, int n_predict, int ignore_eos, const char *const *stop, int n_stop) {
    memset(s, 0, sizeof *s);
    nb_sampler_params sp = nb_sampler_default_params();
    sp.temp = 0;
    nb_gen_params gp = nb_gen_default_params();
    gp.n_predict = n_predict, gp.ignore_eos = ignore_eos, gp.stop = stop, gp.n_stop = n_stop;
    return (s->tok = tiny_vocab()) && !nb_sampler_create(&sp, N_VOCAB, &s->smp) &&
           !nb_gen_create(s->tok, s->smp, &gp, &s->g);
}

static void seq_close(seq *s) {
    nb_gen_free(s->g);
    nb_sampler_free(s->smp);
    nb_tokenizer_free(s->tok);
}

/* One step that samples token id (room positions free); returns the text it released, NUL-terminated. */
static const char *step(seq *s, int id, int room) {
    static char text[256];
    float logits[N_VOCAB] = {0};
    logits[id] = 10;
    int32_t tok;
    nb_status st = nb_gen_step(s->g, logits, room, &tok);
    CHECK(st == NB_OK, "step: %s", nb_last_error());
    s->fed += tok >= 0;
    size_t len;
    const char *p = nb_gen_text(s->g, &len);
    memcpy(text, p, len);
    text[len] = '\0';
    memcpy(s->out + s->n_out, p, len);
    s->n_out += len;
    s->out[s->n_out] = '\0';
    return text;
}

TEST(stop_string_across_tokens_is_held_then_dropped) {
    static const char *const stop[] = {"lo wor", "XYZ"};
    seq s;
    CHECK(seq_open(&s, -1, 0, stop, 2), "open: %s", nb_last_error());
    CHECK(!strcmp(step(&s, V_HEL, 9), "He"), "the 'l' of 'Hel' may start 'lo wor': held");
    CHECK(!strcmp(step(&s, V_LO, 9), "l"), "'Hello': 'lo' is held");
    CHECK(nb_gen_stopped(s.g) == NB_STOP_NONE, "not yet");
    CHECK(!strcmp(step(&s, V_WOR, 9), ""), "'lo wor' completes: nothing more released");
    CHECK(nb_gen_stopped(s.g) == NB_STOP_STRING, "stopped %d", nb_gen_stopped(s.g));
    size_t len;
    const char *reply = nb_gen_reply(s.g, &len);
    CHECK(len == 3 && !memcmp(reply, "Hel", 3) && !strcmp(s.out, "Hel"), "reply '%.*s', out '%s'", (int)len, reply, s.out);
    CHECK(s.fed == 3, "the token that completed the stop string is still fed (%d)", s.fed);
    float logits[N_VOCAB] = {0};
    int32_t tok;
    CHECK(nb_gen_step(s.g, logits, 9, &tok) == NB_ERR_INVALID_ARG && tok == -1, "a stopped reply refuses steps");
    CHECK(nb_gen_get_stats(s.g)->n_gen == 3, "3 tokens generated");
    /* a new reply: the stop string may come inside one token, text before it is released */
    nb_gen_restart(s.g);
    CHECK(!strcmp(step(&s, V_HEL, 9), "He"), "restart: Hel");
    CHECK(!strcmp(step(&s, V_LO, 9), "l"), "held again");
    CHECK(!strcmp(step(&s, V_BANG, 9), "lo!"), "'lo!' rules the stop string out: released");
    seq_close(&s);
}

TEST(held_text_is_released_at_any_other_stop) {
    static const char *const stop[] = {"STOP"};
    seq s;
    CHECK(seq_open(&s, 3, 0, stop, 1), "open: %s", nb_last_error());
    CHECK(!strcmp(step(&s, V_HEL, 9), "Hel"), "Hel");
    CHECK(!strcmp(step(&s, V_STO, 9), ""), "STO held");
    CHECK(!strcmp(step(&s, V_LO, 9), "STOlo"), "n_predict: released");
    CHECK(nb_gen_stopped(s.g) == NB_STOP_LENGTH && s.fed == 3, "stopped %d after feeding %d", nb_gen_stopped(s.g), s.fed);
    /* EOG: held text released, the EOG token neither text nor fed */
    nb_gen_restart(s.g);
    s.fed = 0, s.n_out = 0;
    step(&s, V_STO, 9);
    CHECK(!strcmp(step(&s, V_EOT, 9), "STO") && nb_gen_stopped(s.g) == NB_STOP_EOG && s.fed == 1, "EOG: %s %d",
          s.out, s.fed);
    /* a full context: the token is text but not fed */
    nb_gen_restart(s.g);
    s.fed = 0;
    step(&s, V_STO, 1);
    CHECK(!strcmp(step(&s, V_P, 0), "") && nb_gen_stopped(s.g) == NB_STOP_STRING && s.fed == 1,
          "STOP completes on the last position: a stop string wins (%d), fed %d", nb_gen_stopped(s.g), s.fed);
    nb_gen_restart(s.g);
    s.fed = 0;
    CHECK(!strcmp(step(&s, V_HEL, 0), "Hel") && nb_gen_stopped(s.g) == NB_STOP_CONTEXT && s.fed == 0, "no room: %d",
          nb_gen_stopped(s.g));
    /* cancel releases what was held */
    nb_gen_restart(s.g);
    step(&s, V_STO, 9);
    nb_gen_cancel(s.g);
    size_t len;
    const char *p = nb_gen_text(s.g, &len);
    CHECK(len == 3 && !memcmp(p, "STO", 3) && nb_gen_stopped(s.g) == NB_STOP_CANCEL, "cancel: '%.*s'", (int)len, p);
    seq_close(&s);
}

TEST(utf8_split_across_tokens_is_held) {
    seq s;
    CHECK(seq_open(&s, -1, 0, NULL, 0), "open: %s", nb_last_error());
    CHECK(!strcmp(step(&s, V_WOR, 9), " wor"), "U+2581 is a space");
    CHECK(!strcmp(step(&s, V_E2, 9), ""), "a lead byte is held");
    CHECK(!strcmp(step(&s, V_82, 9), ""), "still incomplete");
    CHECK(!strcmp(step(&s, V_AC, 9), "\xe2\x82\xac"), "the euro sign whole");
    CHECK(!strcmp(step(&s, V_AC, 9), "\xac"), "a stray continuation byte passes");
    step(&s, V_E2, 9);
    CHECK(!strcmp(step(&s, V_EOS, 9), "\xe2") && nb_gen_stopped(s.g) == NB_STOP_EOG, "released at the end");
    seq_close(&s);
}

TEST(n_predict_and_ignore_eos) {
    seq s;
    CHECK(seq_open(&s, 0, 0, NULL, 0), "open");
    float logits[N_VOCAB] = {0};
    int32_t tok;
    CHECK(nb_gen_step(s.g, logits, 9, &tok) == NB_OK && tok == -1 && nb_gen_stopped(s.g) == NB_STOP_LENGTH &&
              nb_gen_get_stats(s.g)->n_gen == 0, "n_predict 0 samples nothing");
    seq_close(&s);
    CHECK(seq_open(&s, 2, 1, NULL, 0), "open");
    CHECK(!strcmp(step(&s, V_EOS, 9), "") && nb_gen_stopped(s.g) == NB_STOP_NONE, "ignore_eos: EOS is a token");
    step(&s, V_LD, 9);
    CHECK(nb_gen_stopped(s.g) == NB_STOP_LENGTH && s.fed == 2 && !strcmp(s.out, "ld"), "two tokens: %s", s.out);
    seq_close(&s);
}

TEST(bad_parameters) {
    nb_tokenizer *t = tiny_vocab();
    nb_sampler *smp;
    nb_sampler_params sp = nb_sampler_default_params();
    CHECK(t && nb_sampler_create(&sp, N_VOCAB, &smp) == NB_OK, "setup");
    nb_gen_params gp = nb_gen_default_params();
    nb_gen *g = NULL;
    const char *stops[NB_GEN_MAX_STOPS + 1];
    for (int i = 0; i <= NB_GEN_MAX_STOPS; i++) stops[i] = "x";
    gp.stop = stops, gp.n_stop = NB_GEN_MAX_STOPS + 1;
    CHECK(nb_gen_create(t, smp, &gp, &g) == NB_ERR_RANGE && !g, "too many stop strings");
    stops[0] = "";
    gp.n_stop = 1;
    CHECK(nb_gen_create(t, smp, &gp, &g) == NB_ERR_RANGE && strstr(nb_last_error(), "empty"), "an empty stop string");
    char *long_stop = malloc(NB_GEN_MAX_STOP_BYTES + 2);
    memset(long_stop, 'a', NB_GEN_MAX_STOP_BYTES + 1);
    long_stop[NB_GEN_MAX_STOP_BYTES + 1] = '\0';
    stops[0] = long_stop;
    CHECK(nb_gen_create(t, smp, &gp, &g) == NB_ERR_RANGE, "a long stop string");
    free(long_stop);
    nb_sampler_free(smp);
    nb_tokenizer_free(t);
}

/* --------------------------------------------- nb_generate on the model */

typedef struct sink {
    char text[8192];
    size_t n;
    int calls, stop_after; /* on_text asks to stop after this many calls (0: never) */
    int polls, cancel_at;  /* cancelled() says yes at this poll (0: never) */
} sink;

static int on_text(void *user, const char *text, size_t len) {
    sink *k = user;
    if (k->n + len < sizeof k->text) memcpy(k->text + k->n, text, len), k->n += len;
    k->text[k->n] = '\0';
    return k->stop_after && ++k->calls >= k->stop_after;
}
static int cancelled(void *user) {
    sink *k = user;
    return k->cancel_at && ++k->polls >= k->cancel_at;
}

/* The default model on a context of n_ctx positions (2 threads) with a greedy sampler, and a
 * generation of n_predict tokens that ignores end-of-generation. */
typedef struct greedy {
    nb_model *m;
    nb_ctx *c;
    const nb_tokenizer *tok;
    nb_sampler *smp;
    nb_gen *g;
    nb_sampler_params sp;
    nb_gen_params gp;
} greedy;

static void greedy_open(greedy *o, int n_ctx, int n_predict) {
    *o = (greedy){.sp = nb_sampler_default_params(), .gp = nb_gen_default_params()};
    CHECK(nb_model_load(MODEL, &o->m) == NB_OK, "load: %s", nb_last_error());
    nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = n_ctx, cp.n_threads = 2;
    CHECK(nb_ctx_create(o->m, &cp, &o->c) == NB_OK, "ctx: %s", nb_last_error());
    o->tok = nb_model_tokenizer(o->m);
    o->sp.temp = 0;
    o->gp.n_predict = n_predict, o->gp.ignore_eos = 1;
    CHECK(nb_sampler_create(&o->sp, nb_model_get_info(o->m)->n_vocab, &o->smp) == NB_OK &&
              nb_gen_create(o->tok, o->smp, &o->gp, &o->g) == NB_OK,
          "gen: %s", nb_last_error());
}

static void greedy_close(greedy *o) {
    nb_gen_free(o->g);
    nb_sampler_free(o->smp);
    nb_ctx_free(o->c);
    nb_model_free(o->m);
}

TEST(generate_on_the_model) {
    if (access(MODEL, R_OK)) SKIP("model %s absent", MODEL);
    greedy o;
    greedy_open(&o, 64, 16);
    int32_t ids[64];
    size_t n;
    CHECK(nb_tokenize(o.tok, "The robot picked up the brush and", 33, 1, 1, ids, 64, &n) == NB_OK, "tokenize");
    sink all = {0};
    nb_gen_io io = {on_text, cancelled, &all};
    CHECK(nb_generate(o.c, o.g, ids, n, &io) == NB_OK, "generate: %s", nb_last_error());
    const nb_gen_stats *st = nb_gen_get_stats(o.g);
    CHECK(nb_gen_stopped(o.g) == NB_STOP_LENGTH && st->n_gen == 16 && st->n_prompt == (int64_t)n && st->t_first > 0 &&
              st->t_gen > 0 && nb_ctx_pos(o.c) == (int)n + 16, "16 tokens: stop %d, %lld, pos %d", nb_gen_stopped(o.g),
          (long long)st->n_gen, nb_ctx_pos(o.c));
    size_t len;
    const char *reply = nb_gen_reply(o.g, &len);
    CHECK(len == all.n && !memcmp(reply, all.text, len) && len > 16, "the reply is what was released: %s", all.text);
    printf("greedy: %s\n", all.text);
    /* a stop string across tokens from the middle of that text: the same text up to it */
    char stop[16];
    const size_t at = len / 2;
    memcpy(stop, all.text + at, 6);
    stop[6] = '\0';
    const char *const stops[] = {stop};
    nb_gen *g2;
    o.gp.stop = stops, o.gp.n_stop = 1;
    nb_sampler_free(o.smp);
    CHECK(nb_sampler_create(&o.sp, nb_model_get_info(o.m)->n_vocab, &o.smp) == NB_OK &&
              nb_gen_create(o.tok, o.smp, &o.gp, &g2) == NB_OK,
          "gen 2");
    nb_ctx_reset(o.c);
    sink cut = {0};
    io.user = &cut;
    CHECK(nb_generate(o.c, g2, ids, n, &io) == NB_OK, "generate 2: %s", nb_last_error());
    const size_t first = (size_t)(strstr(all.text, stop) - all.text);
    CHECK(nb_gen_stopped(g2) == NB_STOP_STRING && cut.n == first && !memcmp(cut.text, all.text, first),
          "stop '%s': got '%s'", stop, cut.text);
    /* the callback stops it after 3 pieces of text, every token fed */
    nb_ctx_reset(o.c);
    sink three = {.stop_after = 3};
    io.user = &three;
    o.gp.n_stop = 0;
    nb_gen_free(g2);
    CHECK(nb_gen_create(o.tok, o.smp, &o.gp, &g2) == NB_OK, "gen 3");
    CHECK(nb_generate(o.c, g2, ids, n, &io) == NB_OK && nb_gen_stopped(g2) == NB_STOP_CANCEL &&
              nb_gen_get_stats(g2)->n_gen >= 3 && nb_ctx_pos(o.c) == (int)n + (int)nb_gen_get_stats(g2)->n_gen,
          "on_text stop: %d, %lld tokens, pos %d", nb_gen_stopped(g2), (long long)nb_gen_get_stats(g2)->n_gen,
          nb_ctx_pos(o.c));
    /* the cancel flag before the first token: nothing sampled */
    nb_ctx_reset(o.c);
    sink none = {.cancel_at = 1};
    io.user = &none;
    CHECK(nb_generate(o.c, g2, ids, n, &io) == NB_OK && nb_gen_stopped(g2) == NB_STOP_CANCEL && none.n == 0 &&
              nb_ctx_pos(o.c) == (int)n, "cancelled at once: %d, pos %d", nb_gen_stopped(g2), nb_ctx_pos(o.c));
    /* a full context */
    nb_ctx_reset(o.c);
    o.gp.n_predict = -1;
    nb_gen_free(g2);
    CHECK(nb_gen_create(o.tok, o.smp, &o.gp, &g2) == NB_OK, "gen 4");
    CHECK(nb_generate(o.c, g2, ids, n, NULL) == NB_OK && nb_gen_stopped(g2) == NB_STOP_CONTEXT && nb_ctx_pos(o.c) == 64,
          "full: %d, pos %d", nb_gen_stopped(g2), nb_ctx_pos(o.c));
    CHECK(nb_generate(o.c, g2, ids, 0, NULL) == NB_ERR_INVALID_ARG, "no prompt");
    nb_gen_free(g2);
    greedy_close(&o);
}

/* ids_eq: the n ids are those of text tokenized (special tokens parsed, BOS when bos). */
static int ids_eq(const nb_tokenizer *tok, const int32_t *ids, size_t n, const char *text, int bos) {
    int32_t want[512];
    size_t nw;
    return nb_tokenize(tok, text, strlen(text), bos, 1, want, 512, &nw) == NB_OK && nw == n &&
           !memcmp(ids, want, n * sizeof *ids);
}

/* A conversation on the model: the first message renders whole (BOS, the system text), a later
 * one only what follows the reply the context holds; a message too long for the context changes
 * nothing; a full context is rebuilt from the newest turns. */
TEST(conversation_on_the_model) {
    if (access(MODEL, R_OK)) SKIP("model %s absent", MODEL);
    greedy o;
    greedy_open(&o, 96, 12);
    int tmpl;
    CHECK(nb_gguf_chat_template(nb_model_gguf(o.m), &tmpl) == NB_OK && !strcmp(nb_chat_template_name(tmpl), "gemma"),
          "the file's template");
    nb_conv *cv;
    CHECK(nb_conv_create(o.tok, tmpl, "Be brief.", &cv) == NB_OK, "conv: %s", nb_last_error());
    const int32_t *ids;
    size_t n, len;
    int dropped;
    CHECK(nb_conv_prompt(cv, o.c, "Hi", 12, &ids, &n, &dropped) == NB_OK && dropped == 0 &&
              ids_eq(o.tok, ids, n, "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n", 1),
          "turn 1: %s", nb_last_error());
    CHECK(nb_generate(o.c, o.g, ids, n, NULL) == NB_OK, "generate: %s", nb_last_error());
    const char *reply = nb_gen_reply(o.g, &len);
    CHECK(nb_conv_add_reply(cv, reply, len) == NB_OK && nb_conv_add_reply(cv, reply, len) == NB_ERR_INVALID_ARG,
          "one reply per message");
    const int pos = nb_ctx_pos(o.c);
    char big[2048] = "";
    for (int i = 0; i < 100; i++) strcat(big, "robot ");
    CHECK(nb_conv_prompt(cv, o.c, big, 12, &ids, &n, &dropped) == NB_ERR_RANGE && strstr(nb_last_error(), "holds 84") &&
              nb_conv_turns(cv) == 1 && nb_ctx_pos(o.c) == pos,
          "too long: %s; %d turns, position %d", nb_last_error(), nb_conv_turns(cv), nb_ctx_pos(o.c));
    CHECK(nb_conv_prompt(cv, o.c, "And now?", 12, &ids, &n, &dropped) == NB_OK && dropped == 0 &&
              ids_eq(o.tok, ids, n, "<end_of_turn>\n<start_of_turn>user\nAnd now?<end_of_turn>\n<start_of_turn>model\n",
                     0),
          "turn 2 follows the reply: %s", nb_last_error());
    /* turns until the context must be rebuilt: then BOS, the system text, the newest turns */
    for (int t = 0; t < 8 && !dropped; t++) {
        CHECK(nb_generate(o.c, o.g, ids, n, NULL) == NB_OK, "generate: %s", nb_last_error());
        reply = nb_gen_reply(o.g, &len);
        CHECK(nb_conv_add_reply(cv, reply, len) == NB_OK, "reply");
        CHECK(nb_conv_prompt(cv, o.c, "Tell me more about robots.", 12, &ids, &n, &dropped) == NB_OK, "turn: %s",
              nb_last_error());
    }
    CHECK(dropped > 0 && nb_ctx_pos(o.c) == 0 && ids[0] == nb_tokenizer_bos(o.tok) && (int)n + 12 <= 96 &&
              nb_conv_turns(cv) >= 1,
          "rebuilt: %d dropped, position %d, %zu ids, %d turns", dropped, nb_ctx_pos(o.c), n, nb_conv_turns(cv));
    CHECK(nb_conv_prompt(cv, o.c, "x", 96, &ids, &n, &dropped) == NB_ERR_INVALID_ARG, "reserve the whole context");
    nb_conv *none = cv;
    CHECK(nb_conv_create(o.tok, -1, NULL, &none) == NB_ERR_INVALID_ARG && !none, "template -1");
    nb_conv_free(cv);
    greedy_close(&o);
}

int main(void) {
    RUN(detects_llama_cpp_template_files);
    RUN(detects_llama2_and_mistral_variants);
    RUN(renders_as_llama_cpp);
    RUN(names_and_bounds);
    RUN(template_of_a_file);
    RUN(stop_string_across_tokens_is_held_then_dropped);
    RUN(held_text_is_released_at_any_other_stop);
    RUN(utf8_split_across_tokens_is_held);
    RUN(n_predict_and_ignore_eos);
    RUN(bad_parameters);
    RUN(generate_on_the_model);
    RUN(conversation_on_the_model);
    return test_summary();
}
