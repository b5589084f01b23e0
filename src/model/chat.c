/*
 * chat.c: llama.cpp's built-in chat templates. A model's tokenizer.chat_template (Jinja text) is
 * recognized by the strings it contains, in the order llm_chat_detect_template tests them, and a
 * list of messages is rendered as llm_chat_apply_template renders it for that family: no Jinja
 * is evaluated. The text is untrusted: it is only searched, within NB_CHAT_MAX_TEMPLATE bytes.
 */
#include <string.h>

#include "base/error.h"
#include "nibble.h"

/* Template ids, in the order of the name table below (llama.cpp's names, sorted). */
enum {
    T_BAILING, T_BAILING_THINK, T_BAILING2, T_CHATGLM3, T_CHATGLM4, T_CHATML, T_COMMAND_R, T_DEEPSEEK,
    T_DEEPSEEK_OCR, T_DEEPSEEK2, T_DEEPSEEK3, T_DOTS1, T_EXAONE_MOE, T_EXAONE3, T_EXAONE4, T_FALCON3, T_GEMMA,
    T_GIGACHAT, T_GLMEDGE, T_GPT_OSS, T_GRANITE, T_GRANITE40, T_GRANITE41, T_GROK2, T_HUNYUAN_DENSE,
    T_HUNYUAN_MOE, T_HUNYUAN_VL, T_KIMI_K2, T_LLAMA2, T_LLAMA2_SYS, T_LLAMA2_SYS_BOS, T_LLAMA2_SYS_STRIP,
    T_LLAMA3, T_LLAMA4, T_MEGREZ, T_MINICPM, T_MISTRAL_V1, T_MISTRAL_V3, T_MISTRAL_V3_TEKKEN, T_MISTRAL_V7,
    T_MISTRAL_V7_TEKKEN, T_MONARCH, T_OPENCHAT, T_ORION, T_PANGU, T_PHI3, T_PHI4, T_RWKV, T_SEED_OSS, T_SMOLVLM,
    T_SOLAR_OPEN, T_VICUNA, T_VICUNA_ORCA, T_YANDEX, T_ZEPHYR, T_COUNT
};

/* dots1 has no name in llama.cpp (detected only); nibble gives it one so that it can be chosen. */
static const char *const NAMES[T_COUNT] = {
    "bailing", "bailing-think", "bailing2", "chatglm3", "chatglm4", "chatml", "command-r", "deepseek",
    "deepseek-ocr", "deepseek2", "deepseek3", "dots1", "exaone-moe", "exaone3", "exaone4", "falcon3", "gemma",
    "gigachat", "glmedge", "gpt-oss", "granite", "granite-4.0", "granite-4.1", "grok-2", "hunyuan-dense",
    "hunyuan-moe", "hunyuan-vl", "kimi-k2", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip",
    "llama3", "llama4", "megrez", "minicpm", "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7",
    "mistral-v7-tekken", "monarch", "openchat", "orion", "pangu-embedded", "phi3", "phi4", "rwkv-world",
    "seed_oss", "smolvlm", "solar-open", "vicuna", "vicuna-orca", "yandex", "zephyr",
};

int nb_chat_template_count(void) { return T_COUNT; }

const char *nb_chat_template_name(int tmpl) { return tmpl >= 0 && tmpl < T_COUNT ? NAMES[tmpl] : NULL; }

int nb_chat_template_find(const char *name) {
    for (int i = 0; name && i < T_COUNT; i++)
        if (!strcmp(name, NAMES[i])) return i;
    return -1;
}

const char *nb_chat_template_list(void) {
    static const char LIST[] =
        "bailing, bailing-think, bailing2, chatglm3, chatglm4, chatml, command-r, deepseek, deepseek-ocr, "
        "deepseek2, deepseek3, dots1, exaone-moe, exaone3, exaone4, falcon3, gemma, gigachat, glmedge, gpt-oss, "
        "granite, granite-4.0, granite-4.1, grok-2, hunyuan-dense, hunyuan-moe, hunyuan-vl, kimi-k2, llama2, "
        "llama2-sys, llama2-sys-bos, llama2-sys-strip, llama3, llama4, megrez, minicpm, mistral-v1, mistral-v3, "
        "mistral-v3-tekken, mistral-v7, mistral-v7-tekken, monarch, openchat, orion, pangu-embedded, phi3, phi4, "
        "rwkv-world, seed_oss, smolvlm, solar-open, vicuna, vicuna-orca, yandex, zephyr";
    return LIST;
}

/* ------------------------------------------------------------- detection */

typedef struct text {
    const char *p;
    size_t n;
} text;

static int has(text t, const char *s) { return memmem(t.p, t.n, s, strlen(s)) != NULL; }

/* llm_chat_detect_template's tests, in its order; -1 when none matches. */
static int detect(text t) {
    if (has(t, "<|im_start|>"))
        return has(t, "<|im_sep|>") ? T_PHI4 : has(t, "<end_of_utterance>") ? T_SMOLVLM : T_CHATML;
    if ((t.n >= 7 && !memcmp(t.p, "mistral", 7)) || has(t, "[INST]")) {
        if (has(t, "[SYSTEM_PROMPT]")) return T_MISTRAL_V7;
        if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]"))
            return has(t, " [INST]") ? T_MISTRAL_V1 : has(t, "\"[INST]\"") ? T_MISTRAL_V3_TEKKEN : T_MISTRAL_V3;
        if (has(t, "content.strip()")) return T_LLAMA2_SYS_STRIP;
        if (has(t, "bos_token + '[INST]")) return T_LLAMA2_SYS_BOS;
        return has(t, "<<SYS>>") ? T_LLAMA2_SYS : T_LLAMA2;
    }
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) return T_PHI3;
    if (has(t, "[gMASK]<sop>")) return T_CHATGLM4;
    if (has(t, "<|assistant|>") && has(t, "<|user|>")) {
        if (has(t, "<|tool_declare|>")) return T_EXAONE_MOE;
        return has(t, "</s>") ? T_FALCON3 : T_GLMEDGE;
    }
    if (has(t, "<|{{ item['role'] }}|>") && has(t, "<|begin_of_image|>")) return T_GLMEDGE;
    if (has(t, "<|user|>") && has(t, "<|endoftext|>")) return T_ZEPHYR;
    if (has(t, "bos_token + message['role']")) return T_MONARCH;
    if (has(t, "<start_of_turn>")) return T_GEMMA;
    if (has(t, "'\\n\\nAssistant: ' + eos_token")) return T_ORION;
    if (has(t, "GPT4 Correct ")) return T_OPENCHAT;
    if (has(t, "USER: ") && has(t, "ASSISTANT: ")) return has(t, "SYSTEM: ") ? T_VICUNA_ORCA : T_VICUNA;
    if (has(t, "### Instruction:") && has(t, "<|EOT|>")) return T_DEEPSEEK;
    if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|USER_TOKEN|>")) return T_COMMAND_R;
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return T_LLAMA3;
    if (has(t, "[gMASK]sop")) return T_CHATGLM3;
    if (has(t, "<\xe7\x94\xa8\xe6\x88\xb7>")) return T_MINICPM; /* <用户> */
    if (has(t, "'Assistant: ' + message['content'] + eos_token")) return T_DEEPSEEK2;
    if (has(t, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>") && has(t, "<\xef\xbd\x9c" "User\xef\xbd\x9c>") &&
        has(t, "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"))
        return T_DEEPSEEK3; /* <｜Assistant｜>, <｜User｜>, <｜end▁of▁sentence｜> */
    if (has(t, "[|system|]") && has(t, "[|assistant|]") && has(t, "[|endofturn|]"))
        return has(t, "[|tool|]") ? T_EXAONE4 : T_EXAONE3;
    if (has(t, "rwkv-world") || has(t, "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}")) return T_RWKV;
    if (has(t, "<|start_of_role|>")) {
        if (has(t, "<tool_call>") || has(t, "<tools>")) return has(t, "g4_default_system_message") ? T_GRANITE40 : T_GRANITE41;
        return T_GRANITE;
    }
    if (has(t, "message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"))
        return T_GIGACHAT;
    if (has(t, "<|role_start|>")) return T_MEGREZ;
    if (has(t, " \xd0\x90\xd1\x81\xd1\x81\xd0\xb8\xd1\x81\xd1\x82\xd0\xb5\xd0\xbd\xd1\x82:")) return T_YANDEX; /* " Ассистент:" */
    if (has(t, "<role>ASSISTANT</role>") && has(t, "'HUMAN'")) return T_BAILING;
    if (has(t, "<role>ASSISTANT</role>") && has(t, "\"HUMAN\"") && has(t, "<think>")) return T_BAILING_THINK;
    if (has(t, "<role>ASSISTANT</role>") && has(t, "<role>HUMAN</role>") && has(t, "<|role_end|>")) return T_BAILING2;
    if (has(t, "<|header_start|>") && has(t, "<|header_end|>")) return T_LLAMA4;
    if (has(t, "<|endofuserprompt|>")) return T_DOTS1;
    if (has(t, "<|extra_0|>") && has(t, "<|extra_4|>")) return T_HUNYUAN_MOE;
    if (has(t, "<|start|>") && has(t, "<|channel|>")) return T_GPT_OSS;
    if (has(t, "<\xef\xbd\x9chy_Assistant\xef\xbd\x9c>") &&
        has(t, "<\xef\xbd\x9chy_begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"))
        return T_HUNYUAN_VL;
    if (has(t, "<\xef\xbd\x9chy_Assistant\xef\xbd\x9c>") &&
        has(t, "<\xef\xbd\x9chy_place\xe2\x96\x81holder\xe2\x96\x81no\xe2\x96\x81" "3\xef\xbd\x9c>"))
        return T_HUNYUAN_DENSE;
    if (has(t, "<|im_assistant|>assistant<|im_middle|>")) return T_KIMI_K2;
    if (has(t, "<seed:bos>")) return T_SEED_OSS;
    if (has(t, "'Assistant: '  + message['content'] + '<|separator|>")) return T_GROK2;
    if (has(t, "[unused9]\xe7\xb3\xbb\xe7\xbb\x9f\xef\xbc\x9a[unused10]")) return T_PANGU; /* [unused9]系统：[unused10] */
    if (has(t, "<|begin|>") && has(t, "<|end|>") && has(t, "<|content|>")) return T_SOLAR_OPEN;
    return -1;
}

nb_status nb_chat_detect(const char *tmpl, size_t len, int *out) {
    *out = -1;
    if (!tmpl) return nb_fail(NB_ERR_INVALID_ARG, "chat: no template text");
    if (len > NB_CHAT_MAX_TEMPLATE)
        return nb_fail(NB_ERR_RANGE, "chat: the template is %zu bytes, over the bound of %u", len, NB_CHAT_MAX_TEMPLATE);
    for (int i = 0; i < T_COUNT; i++) /* a name stands for its template, as in llama.cpp */
        if (strlen(NAMES[i]) == len && !memcmp(tmpl, NAMES[i], len)) return (*out = i), NB_OK;
    if ((*out = detect((text){tmpl, len})) >= 0) return NB_OK;
    return nb_fail(NB_ERR_UNSUPPORTED, "chat: the template (%zu bytes) is none of the known ones (%s)", len,
                   nb_chat_template_list());
}

/* Architectures with one template of their own, for a file that names none. */
static int arch_template(const char *arch) {
    static const struct { const char *arch; int tmpl; } ARCH[] = {
        {"gemma", T_GEMMA}, {"gemma2", T_GEMMA}, {"gemma3", T_GEMMA}, {"qwen2", T_CHATML}, {"qwen3", T_CHATML},
        {"phi3", T_PHI3},
    };
    for (size_t i = 0; i < sizeof ARCH / sizeof ARCH[0]; i++)
        if (!strcmp(arch, ARCH[i].arch)) return ARCH[i].tmpl;
    return -1;
}

nb_status nb_gguf_chat_template(const nb_gguf *g, int *out) {
    *out = -1;
    const int64_t kv = nb_gguf_find_key(g, "tokenizer.chat_template");
    if (kv < 0) {
        const char *arch = "";
        if (nb_gguf_get_string(g, "general.architecture", &arch)) arch = "";
        if ((*out = arch_template(arch)) >= 0) return NB_OK;
        return nb_fail(NB_ERR_UNSUPPORTED, "chat: the file has no tokenizer.chat_template and architecture '%.60s' "
                       "has no template of its own; name one (%s)", arch, nb_chat_template_list());
    }
    nb_gguf_value v;
    nb_status s = nb_gguf_kv_value(g, kv, &v);
    if (s) return s;
    if (v.type != NB_GGUF_STRING)
        return nb_fail(NB_ERR_FORMAT, "chat: tokenizer.chat_template is a %s, not a string", nb_gguf_vtype_name(v.type));
    if (v.v.str.len > NB_CHAT_MAX_TEMPLATE)
        return nb_fail(NB_ERR_RANGE, "chat: tokenizer.chat_template is %llu bytes, over the bound of %u",
                       (unsigned long long)v.v.str.len, NB_CHAT_MAX_TEMPLATE);
    if (!nb_chat_detect(v.v.str.ptr, (size_t)v.v.str.len, out)) return NB_OK;
    return nb_fail(NB_ERR_UNSUPPORTED, "chat: the file's tokenizer.chat_template (%llu bytes) is none of the known "
                   "templates; name one (%s)", (unsigned long long)v.v.str.len, nb_chat_template_list());
}

/* -------------------------------------------------------------- rendering */

/* The output: bytes past cap are counted, not written. Inputs are bounded (nb_chat_apply), so
 * len cannot overflow. */
typedef struct out {
    char *buf;
    size_t cap, len;
} out;

static void putn(out *o, const char *s, size_t n) {
    if (o->len < o->cap) memcpy(o->buf + o->len, s, n < o->cap - o->len ? n : o->cap - o->len);
    o->len += n;
}
static void put(out *o, const char *s) { putn(o, s, strlen(s)); }

/* C-locale isspace, as llama.cpp's trim. */
static int space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static text trim(const char *s) {
    size_t n = strlen(s);
    while (n && space(*s)) s++, n--;
    while (n && space(s[n - 1])) n--;
    return (text){s, n};
}
static void put_trim(out *o, const char *s) {
    text t = trim(s);
    putn(o, t.p, t.n);
}
static void put_upper(out *o, const char *s) {
    for (; *s; s++) {
        const char c = *s >= 'a' && *s <= 'z' ? (char)(*s - 32) : *s;
        putn(o, &c, 1);
    }
}

static int is(const char *role, const char *name) { return !strcmp(role, name); }

/* Templates of the form HEAD (pre role mid content post)* and ASS after the last message. */
typedef struct wrap {
    int tmpl;
    const char *head, *pre, *mid, *post, *ass;
    int trim;
} wrap;

static const wrap WRAPS[] = {
    {T_CHATML, "", "<|im_start|>", "\n", "<|im_end|>\n", "<|im_start|>assistant\n", 0},
    {T_PHI3, "", "<|", "|>\n", "<|end|>\n", "<|assistant|>\n", 0},
    {T_PHI4, "", "<|im_start|>", "<|im_sep|>", "<|im_end|>", "<|im_start|>assistant<|im_sep|>", 0},
    {T_FALCON3, "", "<|", "|>\n", "\n", "<|assistant|>\n", 0},
    {T_ZEPHYR, "", "<|", "|>\n", "<|endoftext|>\n", "<|assistant|>\n", 0},
    {T_LLAMA3, "", "<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>",
     "<|start_header_id|>assistant<|end_header_id|>\n\n", 1},
    {T_LLAMA4, "", "<|header_start|>", "<|header_end|>\n\n", "<|eot|>", "<|header_start|>assistant<|header_end|>\n\n", 1},
    {T_CHATGLM3, "[gMASK]sop", "<|", "|>\n ", "", "<|assistant|>", 0},
    {T_CHATGLM4, "[gMASK]<sop>", "<|", "|>\n", "", "<|assistant|>\n", 0},
    {T_GLMEDGE, "", "<|", "|>\n", "", "<|assistant|>", 0},
    {T_MEGREZ, "", "<|role_start|>", "<|role_end|>", "<|turn_end|>", "<|role_start|>assistant<|role_end|>", 0},
    {T_SOLAR_OPEN, "", "<|begin|>", "<|content|>", "<|end|>", "<|begin|>assistant", 0},
};

/* Templates that mark each role with its own prefix and suffix; a role without a row matches the
 * row "*" where there is one, else writes nothing. ass: after the last message (add_ass). */
typedef struct role_row {
    const char *role, *pre, *post;
    int trim;
} role_row;
typedef struct roles {
    int tmpl;
    const char *ass;
    role_row r[5];
} roles;

#define FULLWIDTH(s) "<\xef\xbd\x9c" s "\xef\xbd\x9c>"
#define EOS_DS FULLWIDTH("end\xe2\x96\x81of\xe2\x96\x81sentence")
static const roles ROLES[] = {
    {T_VICUNA, "ASSISTANT:", {{"system", "", "\n\n", 0}, {"user", "USER: ", "\n", 0}, {"assistant", "ASSISTANT: ", "</s>\n", 0}}},
    {T_VICUNA_ORCA, "ASSISTANT:",
     {{"system", "SYSTEM: ", "\n", 0}, {"user", "USER: ", "\n", 0}, {"assistant", "ASSISTANT: ", "</s>\n", 0}}},
    {T_DEEPSEEK, "### Response:\n",
     {{"system", "", "", 0}, {"user", "### Instruction:\n", "\n", 0}, {"assistant", "### Response:\n", "\n<|EOT|>\n", 0}}},
    {T_DEEPSEEK2, "Assistant:",
     {{"system", "", "\n\n", 0}, {"user", "User: ", "\n\n", 0}, {"assistant", "Assistant: ", EOS_DS, 0}}},
    {T_DEEPSEEK3, FULLWIDTH("Assistant"),
     {{"system", "", "\n\n", 0}, {"user", FULLWIDTH("User"), "", 0}, {"assistant", FULLWIDTH("Assistant"), EOS_DS, 0}}},
    {T_COMMAND_R, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
     {{"system", "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>", "<|END_OF_TURN_TOKEN|>", 1},
      {"user", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>", 1},
      {"assistant", "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>", 1}}},
    {T_EXAONE3, "[|assistant|]",
     {{"system", "[|system|]", "[|endofturn|]\n", 1}, {"user", "[|user|]", "\n", 1},
      {"assistant", "[|assistant|]", "[|endofturn|]\n", 1}}},
    {T_EXAONE4, "[|assistant|]",
     {{"system", "[|system|]", "[|endofturn|]\n", 1}, {"user", "[|user|]", "\n", 1},
      {"assistant", "[|assistant|]", "[|endofturn|]\n", 1}, {"tool", "[|tool|]", "[|endofturn|]\n", 1}}},
    {T_EXAONE_MOE, "<|assistant|>\n",
     {{"system", "<|system|>\n", "<|endofturn|>\n", 1}, {"user", "<|user|>\n", "<|endofturn|>\n", 1},
      {"assistant", "<|assistant|>\n", "<|endofturn|>\n", 1}, {"tool", "<|tool|>\n", "<|endofturn|>\n", 1}}},
    {T_GROK2, "Assistant:",
     {{"system", "System: ", "<|separator|>\n\n", 1}, {"user", "Human: ", "<|separator|>\n\n", 1},
      {"assistant", "Assistant: ", "<|separator|>\n\n", 0}}},
    {T_KIMI_K2, "<|im_assistant|>assistant<|im_middle|>",
     {{"system", "<|im_system|>system<|im_middle|>", "<|im_end|>", 0}, {"user", "<|im_user|>user<|im_middle|>", "<|im_end|>", 0},
      {"assistant", "<|im_assistant|>assistant<|im_middle|>", "<|im_end|>", 0},
      {"tool", "<|im_system|>tool<|im_middle|>", "<|im_end|>", 0}, {"*", "", "<|im_end|>", 0}}},
};

static void render_roles(out *o, const roles *t, const nb_chat_msg *m, size_t n, int add_ass) {
    for (size_t i = 0; i < n; i++) {
        const role_row *r = NULL;
        for (int k = 0; k < 5 && t->r[k].role && !r; k++)
            if (is(m[i].role, t->r[k].role) || is(t->r[k].role, "*")) r = &t->r[k];
        if (!r) continue;
        put(o, r->pre);
        if (r->trim) put_trim(o, m[i].content);
        else put(o, m[i].content);
        put(o, r->post);
    }
    if (add_ass) put(o, t->ass);
}

static void render_mistral(out *o, int tmpl, const nb_chat_msg *m, size_t n) {
    if (tmpl == T_MISTRAL_V7 || tmpl == T_MISTRAL_V7_TEKKEN) {
        const char *sp = tmpl == T_MISTRAL_V7 ? " " : "";
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system")) put(o, "[SYSTEM_PROMPT]"), put(o, sp), put(o, m[i].content), put(o, "[/SYSTEM_PROMPT]");
            else if (is(m[i].role, "user")) put(o, "[INST]"), put(o, sp), put(o, m[i].content), put(o, "[/INST]");
            else put(o, sp), put(o, m[i].content), put(o, "</s>");
        }
        return;
    }
    const char *lead = tmpl == T_MISTRAL_V1 ? " " : "", *trail = tmpl == T_MISTRAL_V3_TEKKEN ? "" : " ";
    int inside = 0;
    for (size_t i = 0; i < n; i++) {
        if (!inside) put(o, lead), put(o, "[INST]"), put(o, trail), inside = 1;
        if (is(m[i].role, "system")) put(o, m[i].content), put(o, "\n\n");
        else if (is(m[i].role, "user")) put(o, m[i].content), put(o, lead), put(o, "[/INST]");
        else {
            put(o, trail);
            if (tmpl == T_MISTRAL_V3) put_trim(o, m[i].content);
            else put(o, m[i].content);
            put(o, "</s>");
            inside = 0;
        }
    }
}

static void render_llama2(out *o, int tmpl, const nb_chat_msg *m, size_t n) {
    const int sys = tmpl != T_LLAMA2, strip = tmpl == T_LLAMA2_SYS_STRIP;
    int inside = 1;
    put(o, "[INST] ");
    for (size_t i = 0; i < n; i++) {
        if (!inside) put(o, tmpl == T_LLAMA2_SYS_BOS ? "<s>[INST] " : "[INST] "), inside = 1;
        text c = strip ? trim(m[i].content) : (text){m[i].content, strlen(m[i].content)};
        if (is(m[i].role, "system")) {
            put(o, sys ? "<<SYS>>\n" : "");
            putn(o, c.p, c.n);
            put(o, sys ? "\n<</SYS>>\n\n" : "\n");
        } else if (is(m[i].role, "user")) putn(o, c.p, c.n), put(o, " [/INST]");
        else putn(o, c.p, c.n), put(o, "</s>"), inside = 0;
    }
}

/* Gemma has no system turn: the system text (trimmed) opens the next user turn. */
static void render_gemma(out *o, const nb_chat_msg *m, size_t n, int add_ass) {
    size_t sys_from = 0, n_sys = 0; /* the system messages not yet written: from sys_from on */
    for (size_t i = 0; i < n; i++) {
        if (is(m[i].role, "system")) {
            if (!n_sys++) sys_from = i;
            continue;
        }
        const int model = is(m[i].role, "assistant") || is(m[i].role, "model");
        put(o, "<start_of_turn>"), put(o, is(m[i].role, "assistant") ? "model" : m[i].role), put(o, "\n");
        if (n_sys && !model) {
            size_t before = o->len;
            for (size_t k = sys_from; k < i; k++)
                if (is(m[k].role, "system")) put_trim(o, m[k].content);
            if (o->len > before) put(o, "\n\n");
            n_sys = 0;
        }
        put_trim(o, m[i].content), put(o, "<end_of_turn>\n");
    }
    if (add_ass) put(o, "<start_of_turn>model\n");
}

static void render(out *o, int t, const nb_chat_msg *m, size_t n, int add_ass) {
    for (size_t k = 0; k < sizeof WRAPS / sizeof WRAPS[0]; k++) {
        const wrap *w = &WRAPS[k];
        if (w->tmpl != t) continue;
        put(o, w->head);
        for (size_t i = 0; i < n; i++) {
            put(o, w->pre), put(o, m[i].role), put(o, w->mid);
            if (w->trim) put_trim(o, m[i].content);
            else put(o, m[i].content);
            put(o, w->post);
        }
        if (add_ass) put(o, w->ass);
        return;
    }
    for (size_t k = 0; k < sizeof ROLES / sizeof ROLES[0]; k++)
        if (ROLES[k].tmpl == t) return render_roles(o, &ROLES[k], m, n, add_ass);
    switch (t) {
    case T_MISTRAL_V1: case T_MISTRAL_V3: case T_MISTRAL_V3_TEKKEN: case T_MISTRAL_V7: case T_MISTRAL_V7_TEKKEN:
        return render_mistral(o, t, m, n);
    case T_LLAMA2: case T_LLAMA2_SYS: case T_LLAMA2_SYS_BOS: case T_LLAMA2_SYS_STRIP:
        return render_llama2(o, t, m, n);
    case T_GEMMA:
        return render_gemma(o, m, n, add_ass);
    case T_MONARCH: /* the <s> is written inside the history, except before the first message */
        for (size_t i = 0; i < n; i++)
            put(o, i ? "<s>" : ""), put(o, m[i].role), put(o, "\n"), put(o, m[i].content), put(o, "</s>\n");
        if (add_ass) put(o, "<s>assistant\n");
        return;
    case T_ORION: { /* the system text opens the next user turn; no add_ass */
        size_t sys_from = 0, n_sys = 0;
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system")) {
                if (!n_sys++) sys_from = i;
            } else if (is(m[i].role, "user")) {
                put(o, "Human: ");
                if (n_sys) {
                    size_t before = o->len;
                    for (size_t k = sys_from; k < i; k++)
                        if (is(m[k].role, "system")) put(o, m[k].content);
                    if (o->len > before) put(o, "\n\n");
                    n_sys = 0;
                }
                put(o, m[i].content), put(o, "\n\nAssistant: </s>");
            } else put(o, m[i].content), put(o, "</s>");
        }
        return;
    }
    case T_OPENCHAT:
        for (size_t i = 0; i < n; i++) {
            if (!is(m[i].role, "system")) {
                const char *r = m[i].role;
                char c = r[0] >= 'a' && r[0] <= 'z' ? (char)(r[0] - 32) : r[0];
                put(o, "GPT4 Correct ");
                if (*r) putn(o, &c, 1), put(o, r + 1);
                put(o, ": ");
            }
            put(o, m[i].content), put(o, "<|end_of_turn|>");
        }
        if (add_ass) put(o, "GPT4 Correct Assistant:");
        return;
    case T_DEEPSEEK_OCR:
        for (size_t i = 0; i < n; i++) put(o, m[i].content);
        return;
    case T_MINICPM:
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "user")) put(o, "<\xe7\x94\xa8\xe6\x88\xb7>"), put_trim(o, m[i].content), put(o, "<AI>");
            else put_trim(o, m[i].content);
        }
        return;
    case T_RWKV:
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system")) put(o, "System: "), put_trim(o, m[i].content), put(o, "\n\n");
            else if (is(m[i].role, "user")) {
                put(o, "User: "), put_trim(o, m[i].content), put(o, "\n\n");
                if (i == n - 1) put(o, "Assistant:");
            } else if (is(m[i].role, "assistant")) put(o, "Assistant: "), put_trim(o, m[i].content), put(o, "\n\n");
        }
        return;
    case T_GRANITE: case T_GRANITE40: case T_GRANITE41:
        for (size_t i = 0; i < n; i++) {
            const int call = is(m[i].role, "assistant_tool_call");
            if (call && t != T_GRANITE) put(o, "<|start_of_role|>assistant<|end_of_role|><|tool_call|>");
            else {
                put(o, "<|start_of_role|>"), put(o, m[i].role), put(o, "<|end_of_role|>");
                if (call) put(o, "<|tool_call|>");
            }
            put(o, m[i].content), put(o, "<|end_of_text|>\n");
        }
        if (add_ass) put(o, "<|start_of_role|>assistant<|end_of_role|>");
        return;
    case T_GIGACHAT: {
        const int sys = n && is(m[0].role, "system");
        put(o, "<s>");
        if (sys) put(o, m[0].content), put(o, "<|message_sep|>");
        for (size_t i = (size_t)sys; i < n; i++) {
            if (is(m[i].role, "user"))
                put(o, "user<|role_sep|>"), put(o, m[i].content),
                    put(o, "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>");
            else if (is(m[i].role, "assistant"))
                put(o, "assistant<|role_sep|>"), put(o, m[i].content), put(o, "<|message_sep|>");
        }
        if (add_ass) put(o, "assistant<|role_sep|>");
        return;
    }
    case T_YANDEX:
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "user"))
                put(o, " \xd0\x9f\xd0\xbe\xd0\xbb\xd1\x8c\xd0\xb7\xd0\xbe\xd0\xb2\xd0\xb0\xd1\x82\xd0\xb5\xd0\xbb\xd1\x8c: "),
                    put(o, m[i].content), put(o, "\n\n"); /* " Пользователь: " */
            else if (is(m[i].role, "assistant"))
                put(o, " \xd0\x90\xd1\x81\xd1\x81\xd0\xb8\xd1\x81\xd1\x82\xd0\xb5\xd0\xbd\xd1\x82: "), put(o, m[i].content),
                    put(o, "\n\n"); /* " Ассистент: " */
        }
        if (add_ass) put(o, " \xd0\x90\xd1\x81\xd1\x81\xd0\xb8\xd1\x81\xd1\x82\xd0\xb5\xd0\xbd\xd1\x82:[SEP]");
        return;
    case T_BAILING: case T_BAILING_THINK: case T_BAILING2: /* roles upper-cased, "user" as HUMAN */
        if (t == T_BAILING2 && !(n && is(m[0].role, "system"))) put(o, "<role>SYSTEM</role>detailed thinking off<|role_end|>");
        for (size_t i = 0; i < n; i++) {
            put(o, "<role>");
            if (is(m[i].role, "user")) put(o, "HUMAN");
            else put_upper(o, m[i].role);
            put(o, "</role>"), put(o, m[i].content);
            if (t == T_BAILING2) put(o, "<|role_end|>");
        }
        if (add_ass) put(o, "<role>ASSISTANT</role>"), put(o, t == T_BAILING_THINK ? "<think>" : "");
        return;
    case T_SMOLVLM:
        put(o, "<|im_start|>");
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system")) put(o, m[i].content), put(o, "\n\n");
            else if (is(m[i].role, "user")) put(o, "User: "), put(o, m[i].content), put(o, "<end_of_utterance>\n");
            else put(o, "Assistant: "), put(o, m[i].content), put(o, "<end_of_utterance>\n");
        }
        if (add_ass) put(o, "Assistant:");
        return;
    case T_DOTS1:
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system")) put(o, "<|system|>"), put(o, m[i].content), put(o, "<|endofsystem|>");
            else if (is(m[i].role, "user")) put(o, "<|userprompt|>"), put(o, m[i].content), put(o, "<|endofuserprompt|>");
            else put(o, "<|response|>"), put(o, m[i].content), put(o, "<|endofresponse|>");
        }
        if (add_ass) put(o, "<|response|>");
        return;
    case T_HUNYUAN_MOE:
        for (size_t i = 0; i < n; i++) {
            if (is(m[i].role, "system")) put(o, "<|startoftext|>"), put(o, m[i].content), put(o, "<|extra_4|>");
            else if (is(m[i].role, "assistant")) put(o, m[i].content), put(o, "<|eos|>");
            else put(o, "<|startoftext|>"), put(o, m[i].content), put(o, "<|extra_0|>");
        }
        return;
    case T_GPT_OSS:
        for (size_t i = 0; i < n; i++)
            put(o, "<|start|>"), put(o, m[i].role), put(o, "<|message|>"), put(o, m[i].content),
                put(o, is(m[i].role, "assistant") ? "<|return|>" : "<|end|>");
        if (add_ass) put(o, "<|start|>assistant");
        return;
    case T_HUNYUAN_DENSE:
        for (size_t i = 0; i < n; i++) {
            if (i == 0 && is(m[i].role, "system"))
                put(o, m[i].content), put(o, FULLWIDTH("hy_place\xe2\x96\x81holder\xe2\x96\x81no\xe2\x96\x81" "3"));
            if (is(m[i].role, "assistant"))
                put(o, FULLWIDTH("hy_Assistant")), put(o, m[i].content),
                    put(o, FULLWIDTH("hy_place\xe2\x96\x81holder\xe2\x96\x81no\xe2\x96\x81" "2"));
            else if (is(m[i].role, "user")) put(o, FULLWIDTH("hy_User")), put(o, m[i].content), put(o, FULLWIDTH("hy_Assistant"));
        }
        return;
    case T_HUNYUAN_VL:
        put(o, FULLWIDTH("hy_begin\xe2\x96\x81of\xe2\x96\x81sentence"));
        for (size_t i = 0; i < n; i++) {
            if (i == 0 && is(m[i].role, "system"))
                put(o, m[i].content), put(o, FULLWIDTH("hy_place\xe2\x96\x81holder\xe2\x96\x81no\xe2\x96\x81" "3"));
            else if (is(m[i].role, "user")) put(o, m[i].content), put(o, FULLWIDTH("hy_User"));
            else if (is(m[i].role, "assistant")) put(o, m[i].content), put(o, FULLWIDTH("hy_Assistant"));
        }
        return;
    case T_SEED_OSS:
        for (size_t i = 0; i < n; i++) {
            put(o, "<seed:bos>"), put(o, m[i].role), put(o, "\n");
            if (is(m[i].role, "assistant")) put_trim(o, m[i].content);
            else put(o, m[i].content);
            put(o, "<seed:eos>");
        }
        if (add_ass) put(o, "<seed:bos>assistant\n");
        return;
    case T_PANGU: {
        static const char *const R[][2] = {
            {"system", "\xe7\xb3\xbb\xe7\xbb\x9f"}, {"user", "\xe7\x94\xa8\xe6\x88\xb7"}, {"assistant", "\xe5\x8a\xa9\xe6\x89\x8b"},
            {"tool", "\xe5\xb7\xa5\xe5\x85\xb7"},   {"function", "\xe6\x96\xb9\xe6\xb3\x95"},
        }; /* 系统 用户 助手 工具 方法 */
        for (size_t i = 0; i < n; i++) {
            if (i == 0 && !is(m[i].role, "system")) put(o, "[unused9]\xe7\xb3\xbb\xe7\xbb\x9f\xef\xbc\x9a[unused10]");
            for (int k = 0; k < 5; k++)
                if (is(m[i].role, R[k][0]))
                    put(o, "[unused9]"), put(o, R[k][1]), put(o, "\xef\xbc\x9a"), put(o, m[i].content), put(o, "[unused10]");
        }
        if (add_ass) put(o, "[unused9]\xe5\x8a\xa9\xe6\x89\x8b\xef\xbc\x9a");
        return;
    }
    }
}

nb_status nb_chat_apply(int tmpl, const nb_chat_msg *msgs, size_t n, int add_ass, char *buf, size_t cap, size_t *len) {
    *len = 0;
    if (tmpl < 0 || tmpl >= T_COUNT) return nb_fail(NB_ERR_INVALID_ARG, "chat: template id %d is not one of the %d", tmpl, T_COUNT);
    if (n > NB_CHAT_MAX_MESSAGES)
        return nb_fail(NB_ERR_RANGE, "chat: %zu messages, over the bound of %d", n, NB_CHAT_MAX_MESSAGES);
    if (n && !msgs) return nb_fail(NB_ERR_INVALID_ARG, "chat: %zu messages and no array", n);
    if (cap && !buf) return nb_fail(NB_ERR_INVALID_ARG, "chat: no output buffer for %zu bytes", cap);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) return nb_fail(NB_ERR_INVALID_ARG, "chat: message %zu has no role or content", i);
        const size_t r = strnlen(msgs[i].role, NB_CHAT_MAX_BYTES + 1), c = strnlen(msgs[i].content, NB_CHAT_MAX_BYTES + 1);
        if (r + c > NB_CHAT_MAX_BYTES - total)
            return nb_fail(NB_ERR_RANGE, "chat: message %zu takes the conversation over the bound of %u bytes", i,
                           NB_CHAT_MAX_BYTES);
        total += r + c;
    }
    /* every input byte is written at most once, with under 128 bytes of markup per message and
     * per conversation: the length stays far below SIZE_MAX */
    out o = {buf, cap, 0};
    render(&o, tmpl, msgs, n, add_ass);
    *len = o.len;
    if (o.len > cap) return nb_fail(NB_ERR_RANGE, "chat: the rendered text is %zu bytes, the buffer %zu", o.len, cap);
    return NB_OK;
}
