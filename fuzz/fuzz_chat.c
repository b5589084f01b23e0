/*
 * fuzz_chat.c: libFuzzer harness for the chat templates. The input's first byte picks add_ass
 * and a template id; the rest is split at NUL bytes: the first part is template text for
 * nb_chat_detect (NUL bytes inside a template are tested by detecting the whole input too), the
 * following parts are (role, content) pairs. Every template the input names or the text is
 * detected as renders the messages: a count-only call, a call into a buffer of exactly that size
 * (same length, NB_OK) and one into a buffer a byte short (NB_ERR_RANGE, the same length, no byte
 * written past it) must agree. ASan/UBSan catch the rest.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nibble.h"

#define MAX_MSGS 64

static void check(int ok) {
    if (!ok) __builtin_trap();
}

static void render(int tmpl, const nb_chat_msg *m, size_t n, int add_ass) {
    size_t need = 0, got = 0;
    nb_status s = nb_chat_apply(tmpl, m, n, add_ass, NULL, 0, &need);
    check(s == NB_OK || (s == NB_ERR_RANGE && need > 0));
    char *buf = malloc(need + 1);
    check(buf != NULL);
    buf[need] = 0x5A;
    check(nb_chat_apply(tmpl, m, n, add_ass, buf, need, &got) == NB_OK && got == need && buf[need] == 0x5A);
    if (need) {
        buf[need - 1] = 0x5A;
        check(nb_chat_apply(tmpl, m, n, add_ass, buf, need - 1, &got) == NB_ERR_RANGE && got == need &&
              buf[need - 1] == 0x5A);
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int add_ass = data[0] & 1, pick = data[0] >> 1;
    char *text = malloc(size);
    check(text != NULL);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0'; /* every part below ends in a NUL */
    int id = -1;
    nb_status s = nb_chat_detect(text, size - 1, &id);
    check((s == NB_OK && id >= 0 && id < nb_chat_template_count()) || (s == NB_ERR_UNSUPPORTED && id == -1));
    const size_t tlen = strlen(text);
    s = nb_chat_detect(text, tlen, &id);
    check((s == NB_OK && id >= 0) || (s == NB_ERR_UNSUPPORTED && id == -1));
    nb_chat_msg m[MAX_MSGS];
    size_t n = 0;
    for (size_t at = tlen + 1; at + 1 < size && n < MAX_MSGS;) {
        const char *role = text + at;
        at += strlen(role) + 1;
        if (at >= size) break;
        const char *content = text + at;
        at += strlen(content) + 1;
        m[n++] = (nb_chat_msg){role, content};
    }
    if (id >= 0) render(id, m, n, add_ass);
    render(pick % nb_chat_template_count(), m, n, add_ass);
    free(text);
    return 0;
}
