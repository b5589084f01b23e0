/*
 * fuzz_gguf.c: libFuzzer harness for the GGUF reader. Parses the input both ways (refusing and
 * listing unsupported types) and, when it is accepted, touches everything a caller could: every
 * value, the ends of arrays, every tensor's first and last byte, look-ups by name. ASan/UBSan turn
 * a read outside the buffer or an overflow into a crash; a crash becomes a file in
 * tests/corpus/bad/ (see docs/SECURITY.md).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nibble.h"

static volatile uint64_t sink;

static void walk(const nb_gguf *g) {
    for (int64_t k = 0; k < nb_gguf_kv_count(g); k++) {
        nb_gguf_value v;
        if (nb_gguf_kv_value(g, k, &v)) __builtin_trap(); /* a listed key must have a value */
        sink += v.v.u;
        if (nb_gguf_find_key(g, nb_gguf_kv_key(g, k)) != k) __builtin_trap();
        if (v.type == NB_GGUF_STRING) sink += strlen(v.v.str.ptr);
        if (v.type != NB_GGUF_ARRAY) continue;
        uint64_t n = v.v.arr.count;
        for (uint64_t i = 0; i < n && i < 64; i++) {
            nb_gguf_value e;
            if (nb_gguf_arr_value(g, k, n - 1 - i, &e)) __builtin_trap();
            if (e.type == NB_GGUF_STRING && e.v.str.len) sink += (uint8_t)e.v.str.ptr[e.v.str.len - 1];
        }
        nb_gguf_value e;
        if (nb_gguf_arr_value(g, k, n, &e) != NB_ERR_RANGE) __builtin_trap();
    }
    for (int64_t i = 0; i < nb_gguf_tensor_count(g); i++) {
        const nb_gguf_tensor *t = nb_gguf_tensor_at(g, i);
        if (nb_gguf_find_tensor(g, t->name) != t) __builtin_trap();
        const uint8_t *p = t->data;
        sink += p[0] + p[t->bytes - 1];
    }
    uint32_t u;
    sink += nb_gguf_get_u32(g, "general.alignment", &u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_gguf *g;
    if (!nb_gguf_parse_ex(data, size, NB_GGUF_LIST_UNSUPPORTED, &g)) {
        walk(g);
        nb_gguf_close(g);
    }
    if (!nb_gguf_parse(data, size, &g)) {
        if (nb_gguf_unsupported_count(g)) __builtin_trap(); /* default mode refuses them */
        nb_gguf_close(g);
    }
    return 0;
}
