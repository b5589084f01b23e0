/*
 * nibble.h: the public C API of nibble, an engine for 4-bit quantized language-model weights.
 *
 * Contract:
 *  - Every fallible call returns an nb_status. NB_OK is 0; anything else is an error whose text
 *    nb_strerror() gives, and nb_last_error() gives the message of the last failure on this thread,
 *    naming what was wrong, where (offset, tensor, key, index) and the limit it broke.
 *  - The library never exits, aborts or prints on bad input.
 *  - Objects are opaque handles created and destroyed in pairs (nb_gguf_open / nb_gguf_close, ...).
 *  - Sizes are int64_t element counts or size_t byte counts; rows are contiguous.
 */
#ifndef NIBBLE_H
#define NIBBLE_H

#include <stddef.h>
#include <stdint.h>

/* Marks the functions libnibble.so exports: the library is compiled with -fvisibility=hidden, so
 * these declarations are its whole ABI. */
#if defined(__GNUC__) || defined(__clang__)
#define NB_API __attribute__((visibility("default")))
#else
#define NB_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

typedef enum nb_status {
    NB_OK = 0,
    NB_ERR_INVALID_ARG,  /* a caller passed something the API does not accept */
    NB_ERR_IO,           /* open/read/write/mmap/rename failed */
    NB_ERR_FORMAT,       /* malformed or hostile file content */
    NB_ERR_UNSUPPORTED,  /* well-formed, but a type/version/architecture nibble does not run */
    NB_ERR_OVERFLOW,     /* a size or count overflowed its checked arithmetic */
    NB_ERR_NOMEM,        /* an allocation failed */
    NB_ERR_RANGE,        /* an index or length outside its valid range */
    NB_ERR_NONFINITE,    /* NaN or Inf given where only finite values are allowed */
} nb_status;

/* Short fixed text for a status ("invalid argument", ...). Never NULL. */
NB_API const char *nb_strerror(nb_status s);

/* The message of the most recent failure on the calling thread ("" if none). */
NB_API const char *nb_last_error(void);

/* Removes (unlinks) every temporary file of an output write in progress in this process (the
 * PATH.tmp.XXXXXX of a GGUF, imatrix, logits or SVG file not yet renamed into place), so that an
 * interrupted run leaves the old file and no debris. Async-signal-safe: meant for a SIGINT/SIGTERM
 * handler that then calls _exit(). At most 16 writes at once are tracked; more still work, but
 * the extra temporary files are not removed. */
NB_API void nb_remove_temp_files(void);

/* Whether `path` may be written as an output, by the rules every writer applies (absent, a regular
 * file, or a symbolic link to one; "-" refused): NB_OK, or NB_ERR_INVALID_ARG / NB_ERR_IO with a
 * message prefixed by `what` ("imatrix"). Lets a long job refuse its output before the work. */
NB_API nb_status nb_output_check(const char *path, const char *what);

/* ------------------------------------------------------------ CPU and ISA */

/* Kernel sets. The best one the CPU supports is chosen once at first use; the environment
 * variable NIBBLE_ISA=ref|avx2|avx512 forces one (a forced set the CPU lacks falls back to the
 * best set it has, and nb_isa_note() says so). */
typedef enum nb_isa {
    NB_ISA_REF = 0,    /* portable scalar C: the definition of correct */
    NB_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
    NB_ISA_AVX512 = 2, /* AVX-512 F/BW/VL (+VNNI when present) */
} nb_isa;

typedef struct nb_cpu_features {
    int avx2, fma, f16c;                       /* and the OS saves YMM state */
    int avx512f, avx512bw, avx512vl, avx512vnni; /* and the OS saves ZMM/opmask state */
} nb_cpu_features;

NB_API const nb_cpu_features *nb_cpu(void);
NB_API nb_isa nb_isa_active(void);
NB_API nb_isa nb_isa_best(void);            /* the best set this CPU can run */
NB_API const char *nb_isa_name(nb_isa isa); /* "ref", "avx2", "avx512" */
NB_API const char *nb_isa_note(void);       /* why the active set was chosen, e.g. an override */

/* ------------------------------------------------------- small number codes */
/* Encoders round to nearest, ties to even, unless a function says otherwise. Rules per code in
 * docs/FORMATS.md. */

NB_API float nb_fp16_to_fp32(uint16_t h);
NB_API uint16_t nb_fp32_to_fp16(float f);   /* IEEE: overflow to Inf, NaN stays a quiet NaN */
NB_API float nb_bf16_to_fp32(uint16_t h);
NB_API uint16_t nb_fp32_to_bf16(float f);   /* RNE; NaN stays a quiet NaN */

NB_API float nb_e4m3_to_fp32(uint8_t c);    /* OCP E4M3FN: bias 7, max 448, S.1111.111 = NaN, no Inf */
NB_API uint8_t nb_fp32_to_e4m3(float f);    /* RNE; saturates at +-448; NaN -> 0x7F */
NB_API float nb_ue4m3_to_fp32(uint8_t c);   /* E4M3 without sign bit (NVFP4 block scale); 0x7F = NaN */
NB_API uint8_t nb_fp32_to_ue4m3(float f);   /* RNE; saturates at 448; negatives and zero -> 0; NaN -> 0x7F */
NB_API float nb_e8m0_to_fp32(uint8_t c);    /* 2^(c-127); 0xFF = NaN */
NB_API uint8_t nb_fp32_to_e8m0(float f);    /* nearest power of two; a tie (1.5*2^k) goes to the even code;
                                               no zero or sign: <= 0 gives 0x00; Inf 0xFE; NaN 0xFF */
NB_API float nb_e2m1_to_fp32(uint8_t c);    /* FP4 element: 0,0.5,1,1.5,2,3,4,6 and negatives; 8 = -0 */
NB_API uint8_t nb_fp32_to_e2m1(float f);    /* RNE on the E2M1 grid; saturates at +-6 (Inf too); no NaN code:
                                               NaN saturates like Inf, keeping its sign */

/* ------------------------------------------------------------- block types */

/* GGUF tensor type ids (ggml enum ggml_type values). */
typedef enum nb_type {
    NB_TYPE_F32 = 0,
    NB_TYPE_F16 = 1,
    NB_TYPE_Q4_0 = 2,
    NB_TYPE_Q4_1 = 3,
    NB_TYPE_Q5_0 = 6,
    NB_TYPE_Q5_1 = 7,
    NB_TYPE_Q8_0 = 8,
    NB_TYPE_Q8_1 = 9,   /* activations of Q4_1 / Q5_1 products only */
    NB_TYPE_Q4_K = 12,
    NB_TYPE_Q5_K = 13,
    NB_TYPE_Q6_K = 14,
    NB_TYPE_Q8_K = 15,
    NB_TYPE_BF16 = 30,
    NB_TYPE_MXFP4 = 39,
    NB_TYPE_NVFP4 = 40,
} nb_type;

typedef struct nb_type_info {
    const char *name;    /* "q4_K" style names as ggml prints them */
    int id;              /* GGUF id */
    int block_elems;     /* elements per block along a row */
    int block_bytes;     /* bytes per block */
    int weight_type;     /* 1 if nibble runs weights of this type (Q8_K is activations only) */
} nb_type_info;

/* Row of the type table for a GGUF id, or NULL (with nb_last_error set) for ids nibble does not
 * know or does not support. */
NB_API const nb_type_info *nb_type_get(int id);
/* Name of any ggml type id, including retired and unsupported ones ("q4_1", "iq2_xxs", ...);
 * "unknown" when the id was never assigned. */
NB_API const char *nb_type_name(int id);
/* Bytes of a row of n elements of a type; fails when n is not a multiple of the block length. */
NB_API nb_status nb_row_bytes(int id, int64_t n, size_t *bytes);
/* The rows of the type table one by one, in id order (i = 0, 1, ... until NULL): every type nibble
 * has a codec for; those with weight_type are the ones it runs and writes. */
NB_API const nb_type_info *nb_type_at(int i);
/* What a llama.cpp K-quant recipe (Q4_K_M and the rest) meant by a type it wrote: the K-quant it
 * wanted when it wrote `id` instead on a row that is not a multiple of 256 (q5_0 for q4_K, q8_0
 * for q6_K, ...), or -1; and whether `id` is a K-quant (q2_K..q6_K) at all, which says that a file
 * was made by such a recipe. Any id; -1 / 0 for ids ggml never assigned. */
NB_API int nb_type_fallback_of(int id);
NB_API int nb_type_is_kquant(int id);
/* Name of a llama.cpp file type (general.file_type: "Q4_K_M", "MXFP4_MOE", ...); "unknown" when
 * llama.cpp never assigned the id. */
NB_API const char *nb_ftype_name(int ftype);

/* Reference quantizer: llama.cpp's reference rules, byte for byte. x must be finite (NaN/Inf are
 * refused with NB_ERR_NONFINITE naming the index); n a multiple of the block length. */
NB_API nb_status nb_quantize(int id, const float *x, void *dst, int64_t n);
/* Dequantizer: bit-exact with llama.cpp's. */
NB_API nb_status nb_dequantize(int id, const void *src, float *y, int64_t n);

/* ------------------------------------------------------ FP4 quantizer options */
/* Alternatives to llama.cpp's reference rules for MXFP4 and NVFP4. Their output is ordinary
 * MXFP4/NVFP4 blocks that nb_dequantize (and llama.cpp) decode; they differ only in how scales and
 * codes are chosen. Same checks as nb_quantize: n a multiple of the block length, finite x. */

/* MXFP4 with the shared exponent rounded UP: e = ceil(log2(amax/6)) + 127 (clamped to 0..254), so
 * the block maximum is never clipped (llama.cpp rounds down and clips block maxima whose mantissa
 * exceeds 1.5); each element then takes the E2M1 code nearest to x/2^(e-127), ties to even. */
NB_API nb_status nb_quantize_mxfp4_roundup(const float *x, void *dst, int64_t n);

/* NVIDIA's two-level NVFP4: a per-tensor encode scale S = 448*6/amax(x[0..n)) (1 when all zero);
 * block scale = UE4M3 of amax16*S/6 (nearest even, saturating at 448); elements = E2M1 nearest
 * even of x/(blockscale/S), saturating at +-6. Writes 1/S to *tensor_scale: dequantize(dst)
 * times *tensor_scale approximates x. In GGUF that factor is the F32 tensor "<name>.scale". */
NB_API nb_status nb_quantize_nvfp4_2level(const float *x, void *dst, int64_t n, float *tensor_scale);
/* The same with the tensor's |max| given (at least every |x[i]|, else NB_ERR_INVALID_ARG), for a
 * tensor quantized a few rows at a time: each call makes the blocks nb_quantize_nvfp4_2level
 * makes of the whole tensor, and the same *tensor_scale. */
NB_API nb_status nb_quantize_nvfp4_2level_amax(const float *x, void *dst, int64_t n, float amax, float *tensor_scale);

/* ------------------------------------------------------- threads and matmul */
/* One thread pool serves every kernel. A pool of N threads is the calling thread plus N-1
 * persistent workers; work is split by output rows into N contiguous chunks that depend only on
 * the sizes, and each output element is computed by the same instruction sequence whatever the
 * chunk, so results are bit-identical for any thread count. A pool runs one job at a time;
 * concurrent callers are serialized. Design, pairing and tolerances: docs/KERNELS.md. */

typedef struct nb_pool nb_pool;
typedef void (*nb_pool_fn)(void *ctx, int64_t begin, int64_t end);

/* The most threads a pool may have; nb_pool_create refuses more with NB_ERR_RANGE. */
#define NB_MAX_THREADS 256

/* n_threads <= 0 means one per online CPU, at most NB_MAX_THREADS. */
NB_API nb_status nb_pool_create(int n_threads, nb_pool **out);
NB_API void nb_pool_destroy(nb_pool *pool);
NB_API int nb_pool_threads(const nb_pool *pool); /* 1 for a NULL pool */
/* Runs fn over [0, n) split in chunks whose bounds are multiples of grain; NULL pool = caller. */
NB_API nb_status nb_pool_for(nb_pool *pool, int64_t n, int64_t grain, nb_pool_fn fn, void *ctx);

/* How activations meet the weights. NB_ROUTE_QUANT (the default, as llama.cpp): activations are
 * quantized to the weight type's partner (Q8_0 for Q4_0/Q5_0/Q8_0/MXFP4/NVFP4, Q8_K for
 * Q4_K/Q5_K/Q6_K) and the dot products run in integers, summed in llama.cpp's order (its bits);
 * F32/F16/BF16 weights always meet f32 activations. NB_ROUTE_BLOCK: the same, except that a
 * product of 16 or more tokens of Q4_0, Q5_0, Q8_0 or NVFP4 weights takes each block's (NVFP4:
 * sub-block's) exact integer sum and rounds once per block, where llama.cpp rounds 8 partial sums
 * (a Q4_0 matrix with a multiple of 8 rows takes that order on both routes: llama.cpp's own for
 * such a matrix, which it copies into 8-row blocks), and one of Q4_K weights rounds once per 256-element block (as its one-token order does), where
 * llama.cpp's batches round per 64 elements (faster prefill, a little closer to the exact
 * product, not llama.cpp's bits). NB_ROUTE_F32:
 * weights are decoded in registers and activations stay f32 (slower, no activation rounding; for
 * accuracy comparisons). Any other value is refused with NB_ERR_INVALID_ARG. */
typedef enum nb_route { NB_ROUTE_QUANT = 0, NB_ROUTE_F32 = 1, NB_ROUTE_BLOCK = 2 } nb_route;

/* y[t*n_out + o] = sum_i W[o,i] * x[t*n_in + i] for o < n_out, t < n_tok. W is n_out rows of
 * n_in elements of type wtype, rows contiguous (a GGUF tensor with ne[0] = n_in, read in place:
 * never copied or dequantized to memory). n_in must be a multiple of the type's block length
 * (and of 256 for the K-quants). y must not overlap x or w. Activation scratch comes from the
 * pool (grown once, reused); a NULL pool runs on the calling thread and allocates per call. The
 * NVFP4 per-tensor ".scale" factor is not applied here: multiply y by it. */
NB_API nb_status nb_matmul(nb_pool *pool, int wtype, const void *w, int64_t n_out, int64_t n_in,
                           const float *x, int64_t n_tok, float *y);
NB_API nb_status nb_matmul_route(nb_pool *pool, int wtype, const void *w, int64_t n_out, int64_t n_in,
                                 const float *x, int64_t n_tok, float *y, nb_route route);

/* As nb_matmul, for a matrix whose rows lie w_stride bytes apart (w_stride >= the bytes of n_in
 * elements): a window of a wider matrix, such as the cached positions of a transposed V cache. */
NB_API nb_status nb_matmul_strided(nb_pool *pool, int wtype, const void *w, size_t w_stride, int64_t n_out,
                                   int64_t n_in, const float *x, int64_t n_tok, float *y);

/* Which kernel a weight type runs with on this CPU, e.g. "avx2 q8_0 x q8_0" or "avx2 q4_K x f32";
 * NULL (with nb_last_error set) when nibble has no kernel for the type or the route is not an
 * nb_route. */
NB_API const char *nb_matmul_kernel_name(int wtype, nb_route route);
/* The same for a weight matrix of n_out rows, whose row count may choose the kernel (a Q4_0 matrix
 * of a multiple of 8 rows runs llama.cpp's 8-row order: "... (8-row order)"); n_out 0 names the
 * type's own kernel, as nb_matmul_kernel_name. */
NB_API const char *nb_matmul_matrix_kernel_name(int wtype, int64_t n_out, nb_route route);

/* ------------------------------------------------------------------ GGUF */
/* Reader for GGUF v2/v3 (little endian) and writer for v3. The reader maps the file read-only and
 * validates every count, length, type, shape and offset before anything is used; tensor data
 * pointers point into the mapping (nothing is copied). Layout and limits: docs/SECURITY.md. */

typedef struct nb_gguf nb_gguf;

/* Metadata value types as a GGUF file stores them. */
typedef enum nb_gguf_vtype {
    NB_GGUF_U8 = 0,
    NB_GGUF_I8 = 1,
    NB_GGUF_U16 = 2,
    NB_GGUF_I16 = 3,
    NB_GGUF_U32 = 4,
    NB_GGUF_I32 = 5,
    NB_GGUF_F32 = 6,
    NB_GGUF_BOOL = 7,
    NB_GGUF_STRING = 8,
    NB_GGUF_ARRAY = 9,
    NB_GGUF_U64 = 10,
    NB_GGUF_I64 = 11,
    NB_GGUF_F64 = 12,
} nb_gguf_vtype;

/* Open flags. By default a tensor of a type nibble cannot run is refused (NB_ERR_UNSUPPORTED
 * naming the tensor and the type). With NB_GGUF_LIST_UNSUPPORTED such tensors of a known ggml
 * type are validated, listed with supported = 0 and counted by nb_gguf_unsupported_count(), so
 * tools such as `inspect` can describe a file nibble will not run. */
enum { NB_GGUF_LIST_UNSUPPORTED = 1u << 0 };
/* NB_GGUF_RESIDENT (for running a model): once the file is validated, fault it in whole, in
 * 2 MiB pages where the kernel allows, re-reading it once if the page cache holds it in 4 KiB
 * pages (reader.c, make_resident, says when and why). */
enum { NB_GGUF_RESIDENT = 1u << 1 };

/* Limits the reader enforces beyond what the bytes themselves bound. */
#define NB_GGUF_MAX_NAME 63          /* tensor name bytes (ggml: 64 including the NUL) */
#define NB_GGUF_MAX_KEY 1024         /* metadata key bytes */
#define NB_GGUF_MAX_DIMS 4
#define NB_GGUF_MAX_ALIGNMENT (1u << 20)
#define NB_GGUF_DEFAULT_ALIGNMENT 32

typedef struct nb_gguf_tensor {
    const char *name;   /* NUL-terminated, 1..NB_GGUF_MAX_NAME bytes */
    int type;           /* GGUF type id (nb_type_name() names it) */
    int supported;      /* 1 when nibble runs this type */
    int n_dims;         /* 1..4 */
    int64_t ne[4];      /* elements per dimension, ne[0] = row length (contiguous); unused dims = 1 */
    uint64_t bytes;     /* bytes of the tensor's data */
    uint64_t offset;    /* from the start of the data section; a multiple of the alignment */
    const void *data;   /* into the mapping (or the parsed buffer) */
} nb_gguf_tensor;

/* One metadata value. Scalar strings are NUL-terminated copies; strings read out of an array point
 * into the mapping and are NOT NUL-terminated (use len). */
typedef struct nb_gguf_value {
    nb_gguf_vtype type;
    union {
        uint64_t u; /* U8 U16 U32 U64 BOOL (0 or 1) */
        int64_t i;  /* I8 I16 I32 I64 */
        double f;   /* F32 F64 */
        struct { const char *ptr; uint64_t len; } str;      /* STRING */
        struct { nb_gguf_vtype type; uint64_t count; } arr; /* ARRAY: element type and count */
    } v;
} nb_gguf_value;

/* "u8", "string", "array", ...; "unknown" for other values. */
NB_API const char *nb_gguf_vtype_name(int type);

NB_API nb_status nb_gguf_open(const char *path, nb_gguf **out);
NB_API nb_status nb_gguf_open_ex(const char *path, unsigned flags, nb_gguf **out);
/* Parse a buffer in memory (tests, fuzzing). The buffer must outlive the handle. */
NB_API nb_status nb_gguf_parse(const void *data, size_t len, nb_gguf **out);
NB_API nb_status nb_gguf_parse_ex(const void *data, size_t len, unsigned flags, nb_gguf **out);
NB_API void nb_gguf_close(nb_gguf *g);

NB_API uint32_t nb_gguf_version(const nb_gguf *g);
NB_API uint32_t nb_gguf_alignment(const nb_gguf *g);
NB_API uint64_t nb_gguf_file_size(const nb_gguf *g);
NB_API uint64_t nb_gguf_data_offset(const nb_gguf *g);  /* where the data section starts in the file */
/* The share of the file's whole 2 MiB spans the kernel maps with 2 MiB pages now, in [0, 1];
 * -1 when unknown (a parsed buffer, a file under 2 MiB, no /proc/self/smaps). Pages not yet
 * faulted in count as not so mapped. */
NB_API double nb_gguf_huge_share(const nb_gguf *g);

/* Metadata by index (0 .. count-1, in file order) */
NB_API int64_t nb_gguf_kv_count(const nb_gguf *g);
NB_API int64_t nb_gguf_find_key(const nb_gguf *g, const char *key); /* index, or -1 when absent */
NB_API const char *nb_gguf_kv_key(const nb_gguf *g, int64_t kv);    /* NULL for a bad index */
NB_API nb_status nb_gguf_kv_value(const nb_gguf *g, int64_t kv, nb_gguf_value *out);
NB_API nb_status nb_gguf_arr_value(const nb_gguf *g, int64_t kv, uint64_t i, nb_gguf_value *out);

/* Typed look-ups by key: NB_ERR_RANGE when the key is absent, NB_ERR_FORMAT when it holds another
 * type (no silent conversion: a file must say what a reader expects). */
NB_API nb_status nb_gguf_get_u32(const nb_gguf *g, const char *key, uint32_t *v);
NB_API nb_status nb_gguf_get_i32(const nb_gguf *g, const char *key, int32_t *v);
NB_API nb_status nb_gguf_get_u64(const nb_gguf *g, const char *key, uint64_t *v);
NB_API nb_status nb_gguf_get_f32(const nb_gguf *g, const char *key, float *v);
NB_API nb_status nb_gguf_get_bool(const nb_gguf *g, const char *key, int *v);
NB_API nb_status nb_gguf_get_string(const nb_gguf *g, const char *key, const char **s); /* NUL-terminated */
/* The index of key "<general.architecture>.<suffix>" (architecture "" when the file names none),
 * -1 when absent or when the name does not fit in key[size]; key (NULL: none wanted) receives the
 * name either way, so that a caller can report it. */
NB_API int64_t nb_gguf_find_arch_key(const nb_gguf *g, const char *suffix, char *key, size_t size);
/* An array of element type `elem`: its kv index and length. Elements then by index: */
NB_API nb_status nb_gguf_get_array(const nb_gguf *g, const char *key, nb_gguf_vtype elem, int64_t *kv,
                                   uint64_t *count);
NB_API nb_status nb_gguf_arr_u32(const nb_gguf *g, int64_t kv, uint64_t i, uint32_t *v);
NB_API nb_status nb_gguf_arr_i32(const nb_gguf *g, int64_t kv, uint64_t i, int32_t *v);
NB_API nb_status nb_gguf_arr_f32(const nb_gguf *g, int64_t kv, uint64_t i, float *v);
NB_API nb_status nb_gguf_arr_str(const nb_gguf *g, int64_t kv, uint64_t i, const char **s, size_t *len);

/* Tensors, in file order */
NB_API int64_t nb_gguf_tensor_count(const nb_gguf *g);
NB_API int64_t nb_gguf_unsupported_count(const nb_gguf *g); /* only non-zero with NB_GGUF_LIST_UNSUPPORTED */
NB_API const nb_gguf_tensor *nb_gguf_tensor_at(const nb_gguf *g, int64_t i);        /* NULL out of range */
NB_API const nb_gguf_tensor *nb_gguf_find_tensor(const nb_gguf *g, const char *name); /* NULL absent */
NB_API int64_t nb_gguf_tensor_rows(const nb_gguf_tensor *t);                      /* ne[1]*ne[2]*ne[3] */
/* The name of a weight's per-tensor factor (NVFP4 two-level, nb_quantize_nvfp4_2level's
 * *tensor_scale): `weight` with ".scale" in place of ".weight", as nb_quantize_model writes it and
 * the model loader reads it. 0, recording no error, when `weight` does not end in ".weight" or
 * the name does not fit in cap bytes. */
NB_API int nb_gguf_scale_name(const char *weight, char *name, size_t cap);

/* Census of a file's tensors, from the header alone (`nibble inspect`): tensors, parameters and
 * bytes per type, and the tensors a llama.cpp K-quant recipe wrote in a fallback type. A file that
 * holds any K-quant was made by such a recipe, so a weight (2+ dimensions) of a legacy type on a
 * row that is not a multiple of 256 stands in for the K-quant nb_type_fallback_of() names. */
#define NB_CENSUS_TYPES 64  /* more than the ids ggml assigned, the only ones the reader lists */
#define NB_CENSUS_GROUPS 32

typedef struct nb_census_count {
    int type;                 /* GGUF type id; -1 in the total */
    uint64_t tensors, params, bytes;
    double bits_per_weight;   /* 8 * bytes / params, 0 without parameters */
} nb_census_count;

/* The fallback tensors of one written type and row length. */
typedef struct nb_census_group {
    int type, wanted;         /* the type written and the K-quant the recipe wanted */
    int64_t row_length;
    uint64_t tensors;
    const char *first;        /* the first such tensor's name, valid while the nb_gguf is open */
} nb_census_group;

typedef struct nb_census {
    int n_types;                          /* types[0 .. n_types): the types present, in id order */
    nb_census_count types[NB_CENSUS_TYPES];
    nb_census_count total;
    int kquants;                          /* the file holds K-quant tensors */
    uint64_t n_fallback;                  /* tensors in a fallback type, grouped or not */
    int n_groups;                         /* groups[0 .. n_groups), in order of first tensor */
    nb_census_group groups[NB_CENSUS_GROUPS];
    uint64_t ungrouped;                   /* fallback tensors of groups past NB_CENSUS_GROUPS */
} nb_census;

NB_API nb_status nb_gguf_census(const nb_gguf *g, nb_census *out);
/* The K-quant the recipe wanted for tensor t of the census's file when t holds a fallback, or -1. */
NB_API int nb_census_fallback_of(const nb_census *c, const nb_gguf_tensor *t);

/* Writer: GGUF v3. Keys keep the order they were first set in; setting a key again replaces its
 * value. Tensor data is NOT copied: it must stay valid until nb_gguf_writer_write() returns.
 * The file is written to a temporary name beside `path` and renamed over it when complete.
 * general.alignment, when set (u32, power of two), is the alignment used. */
typedef struct nb_gguf_writer nb_gguf_writer;

NB_API nb_status nb_gguf_writer_create(nb_gguf_writer **out);
NB_API void nb_gguf_writer_free(nb_gguf_writer *w);
/* Any scalar type (v->type != ARRAY); a string value is v->v.str (ptr, len). */
NB_API nb_status nb_gguf_writer_set(nb_gguf_writer *w, const char *key, const nb_gguf_value *v);
NB_API nb_status nb_gguf_writer_set_u32(nb_gguf_writer *w, const char *key, uint32_t v);
NB_API nb_status nb_gguf_writer_set_i32(nb_gguf_writer *w, const char *key, int32_t v);
NB_API nb_status nb_gguf_writer_set_u64(nb_gguf_writer *w, const char *key, uint64_t v);
NB_API nb_status nb_gguf_writer_set_f32(nb_gguf_writer *w, const char *key, float v);
NB_API nb_status nb_gguf_writer_set_bool(nb_gguf_writer *w, const char *key, int v);
NB_API nb_status nb_gguf_writer_set_string(nb_gguf_writer *w, const char *key, const char *s);
/* Array of `count` elements: numeric types as a packed C array of that type (bool: uint8_t 0/1),
 * strings as `const char *const *` (NUL-terminated). */
NB_API nb_status nb_gguf_writer_set_array(nb_gguf_writer *w, const char *key, nb_gguf_vtype elem, const void *data,
                                          uint64_t count);
NB_API nb_status nb_gguf_writer_add_tensor(nb_gguf_writer *w, const char *name, int type, int n_dims,
                                           const int64_t *ne, const void *data);
NB_API nb_status nb_gguf_writer_write(nb_gguf_writer *w, const char *path);

/* ------------------------------------------------------------- tokenizer */
/* SentencePiece (GGUF tokenizer.ggml.model = "llama") and byte-level BPE ("gpt2", with the
 * pre-tokenizer named by tokenizer.ggml.pre) tokenizers, id-for-id with llama.cpp's
 * llama_tokenize / llama_token_to_piece / llama_detokenize on such a vocabulary. Rules in
 * src/model/tokenizer.h. A tokenizer is immutable once created; every call on it may run on any
 * number of threads at once. */

typedef struct nb_tokenizer nb_tokenizer;

/* GGUF tokenizer.ggml.token_type values */
typedef enum nb_token_type {
    NB_TOKEN_UNDEFINED = 0,
    NB_TOKEN_NORMAL = 1,
    NB_TOKEN_UNKNOWN = 2,
    NB_TOKEN_CONTROL = 3,
    NB_TOKEN_USER_DEFINED = 4,
    NB_TOKEN_UNUSED = 5,
    NB_TOKEN_BYTE = 6,   /* text "<0xHH>": the raw byte HH */
} nb_token_type;

#define NB_VOCAB_MAX_TOKENS (1 << 24) /* tokens in a vocabulary */
#define NB_TOKEN_MAX_BYTES 65536      /* bytes of one token's text */
#define NB_TOKENIZE_MAX_BYTES (1u << 28) /* bytes of text one nb_tokenize call accepts */

typedef struct nb_token_text {
    const char *ptr;  /* not NUL-terminated; NULL only when len is 0 */
    uint64_t len;
} nb_token_text;

typedef enum nb_vocab_model {
    NB_VOCAB_SPM = 0,  /* "llama": SentencePiece scores, U+2581 for spaces, <0xHH> byte fallback */
    NB_VOCAB_BPE = 1,  /* "gpt2": byte-level BPE, GPT-2 byte characters, ranked merges */
} nb_vocab_model;

/* A vocabulary as plain arrays, e.g. straight out of a GGUF mapping. The tokenizer copies the
 * arrays but NOT the text bytes: every texts[i].ptr (and merges[i].ptr) must stay valid until
 * nb_tokenizer_free(). A zeroed tail (model 0, no merges) is the SentencePiece vocabulary. */
typedef struct nb_vocab_desc {
    int64_t n_tokens;            /* 1 .. NB_VOCAB_MAX_TOKENS */
    const nb_token_text *texts;  /* [n_tokens] */
    const float *scores;         /* [n_tokens] finite, or NULL (all 0) */
    const int32_t *types;        /* [n_tokens] nb_token_type, or NULL (all normal) */
    int32_t bos_id, eos_id, unk_id; /* -1 when absent */
    int32_t eot_id;              /* end-of-turn id when the file names one, else -1 */
    int add_bos, add_eos;        /* the vocabulary wants BOS in front / EOS behind */
    int add_space_prefix;        /* SPM: prefix raw text with a space; both: detokenize drops it */
    int model;                   /* nb_vocab_model */
    const char *pre;             /* BPE pre-tokenizer (tokenizer.ggml.pre), NULL = "default" */
    const nb_token_text *merges; /* BPE: [n_merges] "left right" in GPT-2 characters, rank = index */
    int64_t n_merges;
    const char *name;            /* general.name or NULL: llama.cpp keys a few token attributes on it */
} nb_vocab_desc;

/* Validates the descriptor (ids in range, lengths bounded, types known, scores finite, byte tokens
 * spelled <0xHH>, a known pre-tokenizer) and builds the look-up tables. Errors name the token or
 * merge index. Merges that cannot apply (no space after the first byte, an empty side) are kept
 * inert, as llama.cpp keeps them. */
NB_API nb_status nb_tokenizer_create(const nb_vocab_desc *d, nb_tokenizer **out);
/* The vocabulary of an opened GGUF (tokenizer.ggml.*): the "llama" and "gpt2" models; the token
 * texts point into g's mapping, so g must outlive the tokenizer. */
NB_API nb_status nb_tokenizer_from_gguf(const nb_gguf *g, nb_tokenizer **out);
NB_API void nb_tokenizer_free(nb_tokenizer *t);

/* Text (any bytes, len of them) -> token ids. add_special: add BOS/EOS where the vocabulary asks
 * for them (llama.cpp's add_special). parse_special: also split out control tokens written in the
 * text ("<start_of_turn>"); user-defined tokens are always split out. Writes at most cap ids;
 * *n_out is the count, and when it exceeds cap the call returns NB_ERR_RANGE (ids holds the
 * first cap). A byte gives at most one id, except in BPE where a byte of invalid UTF-8 reads as
 * U+FFFD and may give three. */
NB_API nb_status nb_tokenize(const nb_tokenizer *t, const char *text, size_t len, int add_special,
                             int parse_special, int32_t *ids, size_t cap, size_t *n_out);
/* Ids nb_tokenize can write for len bytes: enough room never to see NB_ERR_RANGE (three per byte,
 * plus BOS, EOS and a space prefix). */
#define NB_TOKENIZE_MAX_IDS(len) (3 * (size_t)(len) + 4)

/* The bytes a token stands for: U+2581 becomes ' ' (SPM), GPT-2 characters their bytes (BPE),
 * <0xHH> the byte HH; control and unknown tokens give "" unless `special`; unused and undefined
 * tokens give "". Writes at most cap bytes (no NUL); *len is the piece length, and when it exceeds
 * cap the call returns NB_ERR_RANGE. An id outside the vocabulary is NB_ERR_INVALID_ARG. */
NB_API nb_status nb_token_to_piece(const nb_tokenizer *t, int32_t id, char *buf, size_t cap, size_t *len,
                                   int special);
/* Pieces of n ids, concatenated (llama_detokenize). remove_special: drop a leading BOS and a
 * trailing EOS where the vocabulary adds them; unparse_special: render control tokens. With
 * add_space_prefix the first piece loses one leading space (unless a BOS was dropped). BPE
 * vocabularies whose pre-tokenizer asks for it then clean spaces before punctuation as llama.cpp
 * does. Same cap / *len / NB_ERR_RANGE convention as nb_token_to_piece, except that with that
 * clean-up *len on NB_ERR_RANGE is the length before it (the text returned may be shorter). */
NB_API nb_status nb_detokenize(const nb_tokenizer *t, const int32_t *ids, size_t n, int remove_special,
                               int unparse_special, char *buf, size_t cap, size_t *len);

NB_API int32_t nb_tokenizer_n_tokens(const nb_tokenizer *t);
NB_API int32_t nb_tokenizer_bos(const nb_tokenizer *t);  /* -1 when none */
NB_API int32_t nb_tokenizer_eos(const nb_tokenizer *t);  /* -1 when none */
NB_API int nb_tokenizer_add_bos(const nb_tokenizer *t);  /* the vocabulary wants BOS in front */
/* Id of the token whose text is exactly these bytes ("<end_of_turn>"), or -1. */
NB_API int32_t nb_tokenizer_find(const nb_tokenizer *t, const char *text, size_t len);
/* Raw text of a token (not NUL-terminated; NULL for a bad id). */
NB_API const char *nb_tokenizer_text(const nb_tokenizer *t, int32_t id, size_t *len);
NB_API int nb_tokenizer_type(const nb_tokenizer *t, int32_t id); /* nb_token_type, -1 for a bad id */
/* 1 when the token ends generation: EOS, the end-of-turn id, and tokens llama.cpp marks by text
 * ("<end_of_turn>", "<|eot_id|>", "</s>", ...). */
NB_API int nb_tokenizer_is_eog(const nb_tokenizer *t, int32_t id);

/* --------------------------------------------------------------- runtime */
/* A model is a GGUF checkpoint bound to its family's graph (gemma3, gemma2, llama, qwen2, qwen3,
 * phi3: one decoder, src/model/<arch>.c per family): weights stay
 * in the read-only mapping, every matrix product goes through nb_matmul with the tensor's own
 * type. A context is one sequence: its KV cache and activation arena are allocated once, from
 * n_ctx and n_batch, and nothing is allocated per token. */

typedef struct nb_model nb_model;
typedef struct nb_ctx nb_ctx;

typedef struct nb_model_info {
    char arch[32];          /* general.architecture */
    char name[96];          /* general.name, or "" */
    int n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab, n_ctx_train;
    int sliding_window;     /* 0 when no layer is local */
    int n_sliding;          /* how many layers are local */
    float rope_base;        /* global layers */
    float rope_base_local;  /* sliding-window layers */
    float rms_eps;
    uint64_t weight_bytes;  /* bytes of tensor data the file holds */
    int n_rot;              /* rotated dimensions of each head (rope.dimension_count) */
    float rope_freq_scale;  /* 1 / rope.scaling.factor (global layers); 1: unscaled */
    char rope_scaling[16];  /* "none", "linear", "freqs" (Llama 3 rope_freqs), "longrope" */
    float attn_softcap, final_softcap; /* cap * tanh(x / cap) on the scores / logits; 0: none */
} nb_model_info;

/* Opens, validates and binds a model. Refuses an unknown architecture by name, hyperparameters
 * out of range, and any missing or mis-shaped tensor (naming it). */
NB_API nb_status nb_model_load(const char *path, nb_model **out);
/* The same binding over a GGUF the caller opened (any flags) and keeps open until nb_model_free;
 * nb_model_free leaves it open. */
NB_API nb_status nb_model_bind(const nb_gguf *g, nb_model **out);
NB_API void nb_model_free(nb_model *m);
NB_API const nb_model_info *nb_model_get_info(const nb_model *m);
NB_API const nb_tokenizer *nb_model_tokenizer(const nb_model *m);
NB_API const nb_gguf *nb_model_gguf(const nb_model *m);

enum { NB_FA_AUTO = -1, NB_FA_OFF = 0, NB_FA_ON = 1 };

typedef struct nb_ctx_params {
    int n_ctx;       /* positions the KV cache holds (default 4096, capped at the training context) */
    int n_batch;     /* tokens per prefill step (default 512) */
    int type_k;      /* KV cell types (nb_type): NB_TYPE_F16 (default, as llama.cpp), F32, BF16, */
    int type_v;      /*   Q8_0 or Q4_0; llama.cpp's -ctk / -ctv */
    int flash_attn;  /* NB_FA_AUTO (default), NB_FA_ON: fused attention with an online softmax;
                      * NB_FA_OFF: llama.cpp's unfused order (F16 and F32 cells only) */
    int swa_full;    /* 1: sliding-window layers keep every position (llama.cpp's --swa-full); 0
                      * (default): only the window plus a batch, in a ring */
    int fast_prefill; /* 1: weight products take NB_ROUTE_BLOCK (faster prefill: docs/BENCHMARKS.md;
                       * logits no longer llama.cpp's bits: docs/QUALITY.md); 0 (default): NB_ROUTE_QUANT */
    int fast_batch;  /* 1: nb_batch_eval's steps of two or more sequences take NB_ROUTE_BLOCK (faster
                      * serving, `nibble serve`'s default; a sequence's logits then depend on whether
                      * others share its step); 0 (default): every step takes the route above */
    int n_threads;   /* pool size when pool is NULL (<= 0: one per CPU) */
    nb_pool *pool;   /* optional shared pool (not owned) */
} nb_ctx_params;

NB_API nb_ctx_params nb_ctx_default_params(void);
/* What nb_ctx_create(m, p) would reserve, without creating it: the KV cache and the whole
 * reservation (KV cache plus activation arena, = nb_ctx_memory), in bytes; either pointer may be
 * NULL. p's n_threads (or pool) sizes the per-thread attention scratch. Same checks and errors
 * as nb_ctx_create. */
NB_API nb_status nb_ctx_estimate(const nb_model *m, const nb_ctx_params *p, size_t *kv_bytes, size_t *total_bytes);
NB_API nb_status nb_ctx_create(const nb_model *m, const nb_ctx_params *p, nb_ctx **out);
NB_API void nb_ctx_free(nb_ctx *c);
/* Appends n tokens at positions pos .. pos+n-1 (batched by n_batch). logits: NULL for none; else
 * n_vocab floats of the last token, or n*n_vocab (one row per token) when all_logits. Refuses
 * (NB_ERR_RANGE, nothing changed) when the tokens would not fit in n_ctx, and token ids outside
 * the vocabulary. Results do not depend on the thread count; like llama.cpp's, they depend on the
 * batches (a batch sums in other orders than single tokens: docs/KERNELS.md), and equal
 * llama.cpp's for the same batches (unless fast_prefill). */
NB_API nb_status nb_ctx_eval(nb_ctx *c, const int32_t *tokens, int n, float *logits, int all_logits);
/* An observer sees the input activations of every weight matrix product, before it runs: the
 * tensor's GGUF name, x as n_tok rows of n_in floats (nibble imatrix collects its statistics this
 * way). Called on the evaluating thread; NULL removes it. */
typedef void (*nb_observer_fn)(void *user, const char *tensor, const float *x, int64_t n_tok, int64_t n_in);
NB_API void nb_ctx_set_observer(nb_ctx *c, nb_observer_fn fn, void *user);
NB_API int nb_ctx_pos(const nb_ctx *c);
NB_API int nb_ctx_n_ctx(const nb_ctx *c);
NB_API void nb_ctx_reset(nb_ctx *c);              /* forget every position */
NB_API size_t nb_ctx_memory(const nb_ctx *c);     /* bytes of KV cache plus activation arena */

/* --------------------------------------------------------------- sampling */
/* llama.cpp's default chain: repetition penalty over the last repeat_last_n accepted tokens,
 * top-k, top-p, min-p, temperature, a seeded draw. temp <= 0 is greedy. Same logits, options,
 * seed and history give the same token on any machine and thread count. */
typedef struct nb_sampler nb_sampler;

typedef struct nb_sampler_params {
    float temp;           /* 0.8 */
    int top_k;            /* 40; <= 0 keeps all */
    float top_p;          /* 0.95 */
    float min_p;          /* 0.05 */
    float repeat_penalty; /* 1.0 = off */
    int repeat_last_n;    /* 64 */
    uint64_t seed;
} nb_sampler_params;

NB_API nb_sampler_params nb_sampler_default_params(void);
NB_API nb_status nb_sampler_create(const nb_sampler_params *p, int n_vocab, nb_sampler **out);
NB_API void nb_sampler_free(nb_sampler *s);
NB_API int32_t nb_sampler_sample(nb_sampler *s, const float *logits); /* logits: n_vocab floats */
NB_API void nb_sampler_accept(nb_sampler *s, int32_t tok); /* a token of the sequence (prompt or generated) */

/* ------------------------------------------------------------------ chat */
/* llama.cpp's built-in chat templates: a model's tokenizer.chat_template (Jinja text) is
 * recognized by strings it contains, in the order llama.cpp's llm_chat_detect_template tests
 * them, and messages are rendered by each family's fixed rules as llm_chat_apply_template renders
 * them (no Jinja is evaluated). Templates are ids 0 .. nb_chat_template_count()-1 with llama.cpp's
 * names ("gemma", "llama3", "chatml", "phi3", "llama2-sys", "mistral-v7", ...), plus "dots1",
 * which llama.cpp detects but does not name. Rules per family: src/model/chat.c. */

#define NB_CHAT_MAX_TEMPLATE (1u << 20) /* bytes of template text nb_chat_detect searches */
#define NB_CHAT_MAX_MESSAGES 65536      /* messages of one conversation */
#define NB_CHAT_MAX_BYTES (1u << 28)    /* bytes of the roles and contents of one conversation */

typedef struct nb_chat_msg {
    const char *role;    /* "system", "user", "assistant", ...: NUL-terminated */
    const char *content; /* NUL-terminated, may be "" */
} nb_chat_msg;

NB_API int nb_chat_template_count(void);
NB_API const char *nb_chat_template_name(int tmpl); /* NULL outside 0 .. count-1 */
NB_API int nb_chat_template_find(const char *name); /* the id of a name, or -1 */
/* Every name, ", "-separated in name order, for messages ("bailing, bailing-think, ..."). */
NB_API const char *nb_chat_template_list(void);
/* The template of len bytes of Jinja text (or of a template's name, as llama.cpp accepts one).
 * NB_ERR_UNSUPPORTED, naming the known templates, when it is none of them; NB_ERR_RANGE over
 * NB_CHAT_MAX_TEMPLATE bytes. */
NB_API nb_status nb_chat_detect(const char *tmpl, size_t len, int *id);
/* The template of a model file (nb_model_gguf): its tokenizer.chat_template; a file without one
 * takes its architecture's own (gemma, gemma2, gemma3: gemma; qwen2, qwen3: chatml; phi3: phi3)
 * and is otherwise refused. Failures name the known templates. */
NB_API nb_status nb_gguf_chat_template(const nb_gguf *g, int *id);
/* Renders n messages (add_ass: end with the opening of an assistant turn, where the template has
 * one) as llama.cpp does: no BOS is written, tokenization adds it. A system message goes where the
 * template puts it (gemma: trimmed, with a blank line, at the start of the next user turn; llama2:
 * inside [INST] as <<SYS>>, ...). At most NB_CHAT_MAX_MESSAGES and NB_CHAT_MAX_BYTES, else
 * NB_ERR_RANGE. Writes at most cap bytes (no NUL); *len is the full length, and when it exceeds cap
 * the call returns NB_ERR_RANGE. */
NB_API nb_status nb_chat_apply(int tmpl, const nb_chat_msg *msgs, size_t n, int add_ass, char *buf, size_t cap,
                               size_t *len);

/* ------------------------------------------------------------ generation */
/* One sequence's generation as a state machine that its caller steps: nb_gen_step takes the
 * logits of the last position fed, samples the next token with the sequence's sampler, decides
 * whether the reply goes on, and names the token to feed. A server steps many sequences, each with
 * its own nb_gen, and feeds their tokens in one batch; nb_generate is the loop for one sequence on
 * one context (`nibble run`).
 *
 * Text: every token's piece (control tokens give "") joins the reply, and text is released
 * (nb_gen_text) once it is decided: the end of the reply that could be the start of a stop string
 * is held until the stop string completes or is ruled out, and a stop string and what follows it
 * are never released (as llama-server); an incomplete UTF-8 character at the end is held until its
 * last byte arrives, so released text never splits a character (bytes that are not UTF-8 pass as
 * they are). When the reply stops for any other reason than a stop string, everything held is
 * released. */

typedef enum nb_stop {
    NB_STOP_NONE = 0, /* the reply goes on */
    NB_STOP_EOG,      /* an end-of-generation token was sampled (nb_tokenizer_is_eog): not text, not fed */
    NB_STOP_LENGTH,   /* n_predict tokens */
    NB_STOP_STRING,   /* a stop string completed */
    NB_STOP_CONTEXT,  /* the context has no room for the token sampled */
    NB_STOP_CANCEL,   /* the caller stopped it */
} nb_stop;

#define NB_GEN_MAX_STOPS 16         /* stop strings of a sequence */
#define NB_GEN_MAX_STOP_BYTES 1024  /* bytes of one stop string */

typedef struct nb_gen_params {
    int n_predict;           /* tokens per reply; < 0: no limit (default -1) */
    int ignore_eos;          /* end-of-generation tokens are sampled as any other (default 0) */
    const char *const *stop; /* n_stop stop strings, 1 .. NB_GEN_MAX_STOP_BYTES bytes each (copied) */
    int n_stop;
    int context_shift;       /* nb_generate: a full context forgets half of what follows its first n_keep
                              * positions (nb_ctx_shift, llama.cpp's --context-shift) and goes on,
                              * instead of stopping the reply (default 0) */
    int n_keep;              /* positions a shift keeps (BOS included: llama.cpp's --keep plus BOS);
                              * < 0: those up to the end of the first prompt nb_generate fed (--keep -1) */
} nb_gen_params;

/* Counts over every reply since nb_gen_create. n_gen is kept by nb_gen_step; the rest by
 * nb_generate (a caller that steps itself keeps its own clocks). */
typedef struct nb_gen_stats {
    int64_t n_prompt;  /* prompt tokens evaluated */
    double t_prompt;   /* seconds evaluating them */
    double t_first;    /* seconds from the start of the first prompt to the first token sampled; 0: none */
    int64_t n_gen;     /* tokens generated (an end-of-generation token that stopped a reply is not one) */
    double t_gen;      /* seconds from the end of each prompt to the end of its reply */
    int64_t n_shift;   /* context shifts nb_generate made */
} nb_gen_stats;

typedef struct nb_gen nb_gen;

NB_API nb_gen_params nb_gen_default_params(void);
/* A sequence sampling with smp (not owned; its history is the sequence's) over tok's vocabulary.
 * Refuses more than NB_GEN_MAX_STOPS stop strings and empty or longer ones than NB_GEN_MAX_STOP_BYTES. */
NB_API nb_status nb_gen_create(const nb_tokenizer *tok, nb_sampler *smp, const nb_gen_params *p, nb_gen **out);
NB_API void nb_gen_free(nb_gen *g);
/* Starts a reply: its token count, text and stop are cleared; statistics and the sampler's
 * history stay (a conversation's turns). */
NB_API void nb_gen_restart(nb_gen *g);
/* Tokens the caller feeds the context before the reply: they join the sampler's history. */
NB_API void nb_gen_prompt(nb_gen *g, const int32_t *ids, size_t n);
/* Samples the next token from logits (the vocabulary's floats at the last position fed) and
 * decides the reply's fate (nb_gen_stopped). room: positions free in the context for it; 0 stops
 * the reply after this token (NB_STOP_CONTEXT). *tok: the token to feed next (also when the reply
 * stopped at n_predict or a stop string: the context then holds the whole reply), or -1 when it
 * must not be fed (an end-of-generation token, no room, nothing sampled). A reply of n_predict 0
 * stops at once without sampling. Stepping a stopped reply is NB_ERR_INVALID_ARG. */
NB_API nb_status nb_gen_step(nb_gen *g, const float *logits, int room, int32_t *tok);
/* Stops the reply (NB_STOP_CANCEL) and releases what was held; nothing for a stopped reply. */
NB_API void nb_gen_cancel(nb_gen *g);
NB_API nb_stop nb_gen_stopped(const nb_gen *g);
/* The text released by the last nb_gen_step or nb_gen_cancel (valid until the next call). */
NB_API const char *nb_gen_text(const nb_gen *g, size_t *len);
/* All the text of the reply released so far. */
NB_API const char *nb_gen_reply(const nb_gen *g, size_t *len);
NB_API const nb_gen_stats *nb_gen_get_stats(const nb_gen *g);

/* Text out and cancellation for nb_generate; any member may be NULL. */
typedef struct nb_gen_io {
    int (*on_text)(void *user, const char *text, size_t len); /* released text; non-zero cancels */
    int (*cancelled)(void *user); /* polled before each token is sampled; non-zero cancels */
    void *user;
} nb_gen_io;

/* One reply on context c: restarts g, feeds the n prompt tokens (at least 1, appended at the
 * context's position), then steps and feeds tokens until the reply stops (nb_gen_stopped says why),
 * timing the prompt and the reply into the statistics. io may be NULL. */
NB_API nb_status nb_generate(nb_ctx *c, nb_gen *g, const int32_t *prompt, size_t n, const nb_gen_io *io);

/* ---------------------------------------------------------- conversation */
/* A multi-turn chat held on one context (`nibble run --chat`; a server's requests carry their
 * history instead): the turns kept as text in a chat template, and for each new user message the
 * tokens it adds to the context. After a reply the context holds it as generated (its end-of-turn
 * token sampled, not fed), so a later message adds only the template's text after that reply and
 * its own turn. When that text and the room kept for a reply do not fit in what is left of the
 * context, the context is rebuilt: reset, then BOS, the system text and the most recent turns that
 * fit, the older turns leaving the conversation for good. */
typedef struct nb_conv nb_conv;

/* A conversation in template tmpl (nb_chat_template_find, nb_gguf_chat_template) with tok's
 * vocabulary (not owned); system: a system text (copied), or NULL. */
NB_API nb_status nb_conv_create(const nb_tokenizer *tok, int tmpl, const char *system, nb_conv **out);
NB_API void nb_conv_free(nb_conv *cv);
/* Turns the conversation holds: the newest, and those older ones that have not left it. */
NB_API int nb_conv_turns(const nb_conv *cv);
/* Adds a user message (NUL-terminated, copied; special tokens in it are parsed) and gives the
 * tokens to feed c at its position for it (*ids valid until the next call), rebuilding c as above
 * when they and reserve tokens (0 <= reserve < nb_ctx_n_ctx) do not fit; *dropped: how many turns
 * left to make room. A message that does not fit even alone is NB_ERR_RANGE, naming its tokens and
 * the room; the conversation and the context are then as they were. The caller generates the reply
 * (nb_generate) and hands its text to nb_conv_add_reply; a message that gets none has "" for one. */
NB_API nb_status nb_conv_prompt(nb_conv *cv, nb_ctx *c, const char *user, int reserve, const int32_t **ids, size_t *n,
                                int *dropped);
/* The reply to the newest message, as generated (nb_gen_reply); NB_ERR_INVALID_ARG when no message
 * awaits one. */
NB_API nb_status nb_conv_add_reply(nb_conv *cv, const char *reply, size_t len);

/* ------------------------------------------------ quality: perplexity and KL divergence */
/* Perplexity as llama.cpp's llama-perplexity computes it: the text's tokens (tokenized with BOS)
 * are cut into windows of n_ctx tokens; each window is evaluated from an empty cache with its first
 * token replaced by BOS, and the tokens at positions n_ctx/2+1 .. n_ctx-1 are scored by the
 * distribution at the position before each. PPL = exp(mean nll), error = PPL * stderr(nll).
 * The distributions can be saved (save_path: top K log-probabilities and the mass of the rest per
 * position, layout in src/quant/logprobs.h) and a later run compared with them (base_path):
 * KL(base || model) per position, where the mass outside the base's top K counts as one bucket, so
 * the value is a lower bound of the exact KL (log-sum inequality) and equal to it when K covers the
 * vocabulary. Every statistic is summed in position order: results do not depend on thread count.
 * Details and the statistics' formulas: docs/QUALITY.md. */

/* Called after each window with the running perplexity. */
typedef void (*nb_ppl_progress_fn)(void *user, int windows_done, int n_windows, double ppl);

typedef struct nb_ppl_params {
    int n_ctx;             /* window length, >= 4 and <= the context's n_ctx; 0: the base file's, else 512 */
    int n_chunks;          /* windows to score; <= 0: every whole window (every window of the base file) */
    int n_rows;            /* logit rows per evaluation: memory n_rows * n_vocab floats (default 32) */
    int top_k;             /* probabilities kept per position in save_path (default 64, at most 1024) */
    const char *save_path; /* write the distributions here (temporary name, renamed when complete), or NULL */
    const char *base_path; /* compare with a saved file, or NULL; the windows are then the file's tokens */
    nb_ppl_progress_fn progress; /* or NULL */
    void *user;
} nb_ppl_params;

typedef struct nb_ppl_result {
    int n_ctx, n_chunks;
    int64_t count;                      /* scored positions: n_chunks * (n_ctx - 1 - n_ctx/2) */
    double ppl, ppl_err;
    int has_base;                       /* 1: the fields below were measured against base_path */
    double ppl_base, ppl_base_err;      /* the base's perplexity on the same positions (from the file) */
    double ln_ratio, ln_ratio_err;      /* mean ln(PPL / PPL_base) */
    double kld, kld_err;                /* mean KL divergence, nats */
    double kld_max, kld_p999, kld_p99, kld_p95, kld_p90, kld_median, kld_min;
    double same_top, same_top_err;      /* fraction of positions whose most probable token is the base's */
    double dp_mean, dp_mean_err;        /* dp = p(next token) - p_base(next token) */
    double dp_rms, dp_rms_err, dp_max;  /* dp_max: largest |dp| */
} nb_ppl_result;

NB_API nb_ppl_params nb_ppl_default_params(void);
/* Window and window count of a saved file (either pointer may be NULL), after checking its header
 * and size: a context for nb_perplexity(base_path) needs n_ctx >= the window. */
NB_API nb_status nb_ppl_base_info(const char *path, int *n_ctx, int *n_chunks);
/* Scores tokens[0 .. n_tokens) on c (tokens NULL when base_path gives them). Uses and resets the
 * context. Refuses a text shorter than one window, a window larger than the context, a base file
 * of another vocabulary or window, and parameters out of range, naming the value and the limit. */
NB_API nb_status nb_perplexity(nb_ctx *c, const int32_t *tokens, int64_t n_tokens, const nb_ppl_params *p,
                               nb_ppl_result *out);

/* -------------------------------------------------- quantize and imatrix */
/* Model conversion (`nibble quantize`): reads a GGUF of any supported types, picks an output type
 * per tensor from a recipe, converts row by row (a source row is dequantized to f32 and quantized
 * again; memory stays near one row per thread, the output is staged in a scratch file beside it) and
 * writes a GGUF through a temporary file renamed on success. Metadata is copied in order, then
 * general.quantization_version = 2 and general.file_type (llama.cpp's ftype) are set, as
 * llama-quantize does; tensors are written in llama.cpp's order (non-layer tensors, then by layer,
 * by name). With the reference mode and the recipes q8_0 / q4_0 / q4_k_m the file is byte-identical
 * to llama.cpp's quantize of the same input. Rules per recipe: src/quant/quant.h. */

typedef enum nb_qmode {
    NB_QMODE_REF = 0,   /* llama.cpp's reference quantizers, byte for byte */
    NB_QMODE_BEST = 1,  /* per-block searches that keep a candidate only when its (importance-weighted)
                           squared error is lower than the reference block's: same size, error <= ref */
} nb_qmode;

/* Importance statistics per weight matrix: for each input column, the mean over tokens of x^2 of
 * the activations the matrix multiplies (llama.cpp's imatrix meaning). */
typedef struct nb_imatrix nb_imatrix;

/* What one tensor became, reported after it is converted or copied. */
typedef struct nb_quant_report {
    const char *name;
    int src_type, dst_type;
    int64_t n_elem;
    uint64_t bytes;    /* output bytes */
    int measured;      /* sse/sum_x2 are set (measure on and the tensor was converted) */
    double sse;        /* sum over elements of (decoded output - source)^2, after any .scale factor */
    double sum_x2;     /* sum of source^2 */
} nb_quant_report;

typedef struct nb_quant_params {
    const char *recipe;   /* q8_0 q4_0 q4_k_m mxfp4 nvfp4 mxfp4_m nvfp4_m nvfp4_2l, or auto:BPW (e.g. auto:5.0) */
    nb_qmode mode;
    int two_level;        /* NVFP4 tensors take NVIDIA's two-level recipe and a "<name>.scale" F32 {1}
                             tensor (the weight's name with ".scale" in place of ".weight") */
    int pure_type;        /* >= 0: every quantizable weight takes this type (recipe rules off); -1 */
    int embed_type;       /* >= 0: type of token_embd.weight and output.weight; -1: the recipe's */
    const char *const *overrides; /* n_overrides "REGEX=TYPE": the first POSIX extended regex found in
                                     a quantizable tensor's name sets its type */
    int n_overrides;
    const nb_imatrix *imatrix;    /* optional: weights every best-mode search and auto's measurement */
    int n_threads;        /* pool size when pool is NULL (<= 0: one per CPU); output is identical for any */
    nb_pool *pool;        /* optional, not owned */
    int measure;          /* compute nb_quant_report.sse (decodes each converted tensor once more) */
    void (*progress)(void *user, uint64_t done, uint64_t total); /* source bytes processed */
    void (*on_tensor)(void *user, const nb_quant_report *r);
    void *user;
} nb_quant_params;

NB_API nb_quant_params nb_quant_default_params(void);
NB_API nb_status nb_quantize_model(const char *in_path, const char *out_path, const nb_quant_params *p);
/* Id of a weight type (nb_type_info.weight_type) by the name ggml prints, any case ("q4_K", "Q8_0",
 * "f16"); -1 for any other name, q8_K (activations only) included. */
NB_API int nb_type_from_name(const char *name);

NB_API nb_status nb_imatrix_create(nb_imatrix **out);
NB_API void nb_imatrix_free(nb_imatrix *im);
/* An nb_observer_fn (user = the nb_imatrix): adds x^2 of n_tok rows to the tensor's sums. An
 * allocation failure or a width that changes is remembered and reported by nb_imatrix_status(). */
NB_API void nb_imatrix_observe(void *im, const char *tensor, const float *x, int64_t n_tok, int64_t n_in);
NB_API void nb_imatrix_end_chunk(nb_imatrix *im);            /* one more chunk of text evaluated */
NB_API nb_status nb_imatrix_status(const nb_imatrix *im);    /* NB_OK, or the first failure inside observe */
NB_API int64_t nb_imatrix_count(const nb_imatrix *im);       /* matrices with statistics */
/* Mean x^2 per input column of a tensor (n_in values), or NULL when it has none. */
NB_API const float *nb_imatrix_find(const nb_imatrix *im, const char *tensor, int64_t *n_in);
/* llama.cpp's GGUF imatrix format: general.type = "imatrix", imatrix.datasets (strings),
 * imatrix.chunk_count, imatrix.chunk_size (u32); per matrix "<name>.in_sum2" F32 {n_in, 1} (sum of
 * x^2) and "<name>.counts" F32 {1, 1} (tokens seen), names sorted. */
NB_API nb_status nb_imatrix_save(const nb_imatrix *im, const char *path, const char *dataset, uint32_t chunk_size);
NB_API nb_status nb_imatrix_load(const char *path, nb_imatrix **out);
/* llama-imatrix's collection (`nibble imatrix`): n_chunks chunks of n_ctx tokens from tokens[0 ..),
 * each with its first token replaced by BOS when the vocabulary adds one, each evaluated on c from
 * an empty cache while nb_imatrix_observe adds every matrix input to im, then nb_imatrix_end_chunk.
 * The output matrix sees its input only where logits are computed: with process_output every
 * position's are, NB_IMATRIX_OUTPUT_SLICE positions an evaluation, and dropped; without, a chunk is
 * one evaluation and no logits. Uses and resets the context, and removes its observer afterwards.
 * Refuses n_ctx outside 1 .. the context's, n_chunks < 1 and a text shorter than n_chunks chunks. */
#define NB_IMATRIX_OUTPUT_SLICE 64 /* a logits row of a 262144-token vocabulary is 1 MiB */
typedef void (*nb_imatrix_progress_fn)(void *user, int chunks_done, int n_chunks); /* after each chunk */
typedef struct nb_imatrix_params {
    int n_ctx, n_chunks;
    int process_output;
    nb_imatrix_progress_fn progress; /* or NULL */
    void *user;
} nb_imatrix_params;
NB_API nb_status nb_imatrix_collect(nb_ctx *c, nb_imatrix *im, const int32_t *tokens, int64_t n_tokens,
                                    const nb_imatrix_params *p);

/* ------------------------------------------------ continuous batching */
/* One forward pass for several sequences of one model: sequence i appends n_tokens[i] >= 1 tokens
 * to its own context ctxs[i] at that context's positions, so that one pass over the weights serves
 * every sequence (a server's decode steps, with prompt chunks mixed in). Matrix products run over
 * the stacked rows of all sequences; RoPE, the KV cache and attention are each sequence's own. The
 * rows live in ctxs[0]'s activation arena, so their total must be at most ctxs[0]'s n_batch (as
 * nb_ctx_create capped it: at most its n_ctx), else NB_ERR_RANGE. Every context must have the same
 * model, the same thread pool (nb_ctx_params.pool), attention route and fast_prefill, and appear
 * once. logits: NULL, or n_seq rows
 * of n_vocab floats, row i for the last token of sequence i. Every sequence is checked as
 * nb_ctx_eval checks its tokens before anything changes. One sequence of at most n_batch tokens is
 * nb_ctx_eval of them, bit for bit. Results do not depend on the thread count, but they depend on
 * which rows share the pass, as a batch's rows do (docs/KERNELS.md): a row's matrix products sum
 * in the batch orders of its place among the rows, and a sequence's attention takes the one-token
 * order when it has one token in the pass. */
#define NB_BATCH_MAX_SEQ 256
NB_API nb_status nb_batch_eval(nb_ctx *const *ctxs, const int32_t *const *tokens, const int *n_tokens, int n_seq,
                               float *logits);
/* Forgets positions n and after, 0 <= n <= nb_ctx_pos (else NB_ERR_RANGE): a prompt that begins
 * with the first n tokens the context holds then evaluates only the rest (prompt reuse). A
 * sliding-window ring that no longer holds the window before position n forgets everything
 * (as llama.cpp's window-sized cache must): nb_ctx_pos says what was kept. */
NB_API nb_status nb_ctx_truncate(nb_ctx *c, int n);
/* Context shift (llama.cpp's --context-shift): forgets positions keep .. keep + n_discard - 1 and
 * moves the later ones n_discard lower, their keys rotated back by RoPE (quantized cells are
 * decoded, rotated and stored again), so that evaluation can go on in a full context. Rings keep
 * what they still held. NB_ERR_RANGE (nothing changed) unless keep >= 0 and 1 <= n_discard <=
 * nb_ctx_pos - keep; NB_ERR_NOMEM. */
NB_API nb_status nb_ctx_shift(nb_ctx *c, int keep, int n_discard);

/* ------------------------------------------------------------ benchmark */
/* One test of a model benchmark as llama.cpp's llama-bench runs it (`nibble bench -m`): ppN, the
 * prefill of n_prompt tokens; tgN, n_gen single-token decode steps; pgP,N, both (the prefill, then
 * the steps, timed together); each into a context that already holds n_depth tokens. Token ids
 * are drawn from the vocabulary (seeded); a prefill's first token, and a decode run's first, is BOS
 * where the vocabulary adds one. The context is created for the test with n_ctx = n_depth +
 * n_prompt + n_gen, as llama-bench sizes it, and freed after. With warmup, one untimed run first as
 * llama-bench's: a prefill of n_prompt on the empty context and one decode step. Then the depth is
 * filled once (untimed), and each repetition is timed and the context truncated back to n_depth
 * after it. Decode steps compute the logits of their token and sample nothing (the next id is
 * drawn), as llama-bench's. */
#define NB_BENCH_MAX_REPS 100

typedef struct nb_bench_params {
    int n_prompt;      /* prefill tokens, >= 0 (default 512) */
    int n_gen;         /* decode steps, >= 0 (default 0); n_prompt + n_gen >= 1 */
    int n_depth;       /* tokens in the context before the timed part, >= 0 (default 0) */
    int n_batch;       /* tokens per nb_ctx_eval call of a prefill (llama-bench's -b; default 2048);
                        * ctx.n_batch is the forward pass's step (its -ub; default 512) */
    int reps;          /* timed repetitions, 1 .. NB_BENCH_MAX_REPS (default 5) */
    int warmup;        /* 1 (default): one untimed run first */
    uint64_t seed;     /* the token ids' */
    nb_ctx_params ctx; /* cache types, attention, batch step, threads or pool; n_ctx is the test's */
} nb_bench_params;

typedef struct nb_bench_result {
    int n_reps;
    uint64_t samples_ns[NB_BENCH_MAX_REPS]; /* each repetition's time */
    double samples_ts[NB_BENCH_MAX_REPS];   /* its tokens per second: (n_prompt + n_gen) / time */
    uint64_t avg_ns, stddev_ns;             /* llama-bench's avg_ns and stddev_ns (rounded) */
    double avg_ts, stddev_ts, median_ts;    /* stddev: the sample's (n - 1), 0 for one repetition */
    double step_bytes;  /* mean bytes a decode step of the test reads (nb_decode_step_bytes); 0: none */
    int n_threads;      /* the pool's threads */
} nb_bench_result;

NB_API nb_bench_params nb_bench_default_params(void);
/* Runs one test on m. Refuses parameters out of range (NB_ERR_INVALID_ARG, naming the value), and
 * fails as nb_ctx_create does where the context is refused (cache types or attention this build
 * lacks, n_ctx past the training context), naming the reason; out is then zeroed. */
NB_API nb_status nb_bench_run(const nb_model *m, const nb_bench_params *p, nb_bench_result *out);
/* Bytes one decode step at position pos (0-based: pos tokens already cached) reads: every weight
 * tensor of the file (the tied output matrix once) plus the keys and values it attends to, in
 * cells of type_k and type_v (nb_row_bytes of head_dim elements), positions 0 .. pos on global
 * layers and at most the window on sliding-window ones (what `nibble bench roofline` divides the
 * streaming bandwidth by). Refuses a type whose block does not divide head_dim. */
NB_API nb_status nb_decode_step_bytes(const nb_model *m, int type_k, int type_v, int pos, double *bytes);

/* Machine benchmarks (`nibble bench kernels`, `nibble bench roofline`): each figure is taken reps
 * times (1 .. NB_BENCH_MAX_REPS) and given as its median and range. */
typedef struct nb_bench_stat {
    double median, min, max;
} nb_bench_stat;

/* A benchmark's weight matrix: n_out rows of n_in elements of a type, one 64-row slab of seeded
 * pseudo-random values in [-1, 1] quantized by nb_quantize and repeated down the rows, in 2 MiB
 * pages where the kernel allows (as nb_gguf_open maps a model's weights). *w (to free()) and its
 * *bytes, or the status of nb_row_bytes or nb_quantize for the type, NB_ERR_NOMEM. */
NB_API nb_status nb_bench_matrix(int type, int64_t n_out, int64_t n_in, uint32_t seed, void **w, size_t *bytes);
/* Streaming-read bandwidth in GB/s: passes sums over a 1 GiB buffer (touched first) split over
 * the pool's threads, each reading its part as four streams at once, as a GEMV reads a matrix. */
NB_API nb_status nb_bench_stream(nb_pool *pool, int passes, nb_bench_stat *gbs);

typedef struct nb_bench_kernel_result {
    const char *kernel;              /* nb_matmul_kernel_name(type, NB_ROUTE_QUANT) */
    nb_bench_stat gemv_gbs;          /* weight bytes read per second, one token on 16384 x 14336 (past any L3) */
    nb_bench_stat gemm_gflops;       /* 512 tokens on 4096 x 4096, NB_ROUTE_QUANT */
    nb_bench_stat gemm_block_gflops; /* the same by NB_ROUTE_BLOCK; zero for a type without that order */
    nb_bench_stat quant_ms;          /* a 4-row product of 512 tokens: the activations' quantization, an upper bound */
} nb_bench_kernel_result;
/* One weight type's products on the active kernel set, on nb_bench_matrix weights (the GEMV
 * matrix freed before the GEMM's is made): reps GEMVs after a warm one; min(reps, 3) of each GEMM
 * figure (a GEMM of the slow types takes seconds). */
NB_API nb_status nb_bench_kernel(nb_pool *pool, int type, int reps, nb_bench_kernel_result *out);

typedef struct nb_bench_roofline_result {
    nb_bench_stat stream_gbs; /* each round's streaming rate: the median of 3 passes */
    nb_bench_stat decode_ts;  /* each round's decode tokens per second */
    nb_bench_stat ceiling_ts; /* stream / step_bytes: the tokens per second the bandwidth allows */
    nb_bench_stat share;      /* percent of its round's ceiling that a round's decode reached */
    double step_bytes;        /* the mean bytes a decode step reads (nb_decode_step_bytes) */
} nb_bench_roofline_result;
/* Decode against its memory ceiling on the pool: one untimed run (the weights' pages), then rounds
 * (1 .. NB_BENCH_MAX_REPS) of a streaming rate and nb_bench_run's tg n_gen at depth 1 (`nibble
 * bench -n N -d 1`, its warm-up step included), each round's share taken against its own rate as
 * the machine's bandwidth drifts between rounds. */
NB_API nb_status nb_bench_roofline(const nb_model *m, nb_pool *pool, int n_gen, int rounds,
                                   nb_bench_roofline_result *out);

#ifdef __cplusplus
}
#endif
#endif
