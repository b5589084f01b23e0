#!/usr/bin/env python3
"""Parity of nibble's block codecs with two independent oracles.

  - dequantize: nibble vs gguf's numpy dequantizers, and vs ggml's own C `to_float`, on blocks of
    random bytes (fp16 scale fields forced finite): float32 bit patterns must be identical.
  - quantize: nibble vs llama.cpp's C quantizer (ggml_quantize_chunk with no importance matrix,
    from the libggml-base that llama-cpp-python installs) and vs gguf's numpy quantizers where
    gguf has one: bytes must be identical.
  - Q8_K: nibble vs ggml's exported quantize_row_q8_K_ref / dequantize_row_q8_K; Q8_1 (the file
    rule) vs quantize_row_q8_1_ref (ggml has no Q8_1 dequantizer, gguf no Q8_1 codec).

Inputs cover several distributions (normal, uniform, heavy-tailed, all-zero blocks, one outlier per
block, tiny and f32-subnormal magnitudes, constant blocks, values on rounding ties, mixed block
scales). Each comparison is one test; the last line is "N passed, N failed[, N skipped]".
Library: $NB_BUILD/libnibble.so (NB_BUILD defaults to "build").
"""
import ctypes
import importlib.util
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import quants as gq

sys.path.insert(0, os.path.dirname(__file__))
from tally import Tally  # noqa: E402

BUILD = os.environ.get("NB_BUILD", "build")
ROW = 1024  # elements per row handed to ggml_quantize_chunk: a multiple of every block length
N = 64 * ROW  # elements per distribution

# id, gguf type, block elements, block bytes, byte offsets of fp16 fields in a block (None = every
# element is an fp16), gguf has a numpy quantizer
TYPES = {
    "f16": (1, QT.F16, 1, 2, None, True),
    "bf16": (30, QT.BF16, 1, 2, (), True),
    "q4_0": (2, QT.Q4_0, 32, 18, (0,), True),
    "q4_1": (3, QT.Q4_1, 32, 20, (0, 2), True),
    "q5_0": (6, QT.Q5_0, 32, 22, (0,), True),
    "q5_1": (7, QT.Q5_1, 32, 24, (0, 2), True),
    "q8_0": (8, QT.Q8_0, 32, 34, (0,), True),
    "q4_K": (12, QT.Q4_K, 256, 144, (0, 2), False),
    "q5_K": (13, QT.Q5_K, 256, 176, (0, 2), False),
    "q6_K": (14, QT.Q6_K, 256, 210, (208,), False),
    "mxfp4": (39, QT.MXFP4, 32, 17, (), True),
    "nvfp4": (40, QT.NVFP4, 64, 36, (), False),
}
QUANT_VS_GGML = ["f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_K", "q5_K", "q6_K", "mxfp4", "nvfp4"]

T = Tally(verbose=True)


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


# ------------------------------------------------------------------ libraries

nb = ctypes.CDLL(os.path.join(BUILD, "libnibble.so"))
nb.nb_quantize.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
nb.nb_dequantize.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
nb.nb_last_error.restype = ctypes.c_char_p


class TypeTraits(ctypes.Structure):  # struct ggml_type_traits (ggml/include/ggml.h)
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                ("from_float_ref", ctypes.c_void_p)]


ROWFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def load_ggml():
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None, "llama-cpp-python is not installed"
    path = os.path.join(spec.submodule_search_locations[0], "lib", "libggml-base.so")
    if not os.path.exists(path):
        return None, f"{path} not found"
    lib = ctypes.CDLL(path)
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    lib.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    return lib, None


ggml, ggml_why = load_ggml()


def nb_quantize(tid, x, nbytes):
    out = np.zeros(nbytes, dtype=np.uint8)
    rc = nb.nb_quantize(tid, ptr(x), ptr(out), x.size)
    if rc != 0:
        raise RuntimeError(f"nb_quantize({tid}) = {rc}: {nb.nb_last_error().decode()}")
    return out


def nb_dequantize(tid, raw, n):
    out = np.full(n, np.nan, dtype=np.float32)  # an unwritten element cannot pass
    rc = nb.nb_dequantize(tid, ptr(raw), ptr(out), n)
    if rc != 0:
        raise RuntimeError(f"nb_dequantize({tid}) = {rc}: {nb.nb_last_error().decode()}")
    return out


def same_floats(a, b):
    """Bit-identical float32 arrays, any NaN matching any NaN. Returns (ok, detail)."""
    a = np.asarray(a, dtype=np.float32).ravel()
    b = np.asarray(b, dtype=np.float32).ravel()
    if a.shape != b.shape:
        return False, f"shapes {a.shape} vs {b.shape}"
    diff = (a.view(np.uint32) != b.view(np.uint32)) & ~(np.isnan(a) & np.isnan(b))
    if not diff.any():
        return True, ""
    i = int(np.flatnonzero(diff)[0])
    return False, f"{int(diff.sum())} elements differ; first at {i}: {a[i]!r} vs {b[i]!r}"


def same_bytes(a, b, block_bytes):
    a = np.asarray(a, dtype=np.uint8).ravel()
    b = np.asarray(b, dtype=np.uint8).ravel()
    if a.shape != b.shape:
        return False, f"sizes {a.size} vs {b.size}"
    diff = a != b
    if not diff.any():
        return True, ""
    i = int(np.flatnonzero(diff)[0])
    blk = i // block_bytes
    return False, (f"{int(diff.sum())} bytes differ in {len(np.unique(np.flatnonzero(diff) // block_bytes))} "
                   f"blocks; first block {blk} byte {i % block_bytes}: "
                   f"{a[blk * block_bytes:(blk + 1) * block_bytes].tobytes().hex()} vs "
                   f"{b[blk * block_bytes:(blk + 1) * block_bytes].tobytes().hex()}")


# ------------------------------------------------------------------ inputs

def distributions(rng):
    """name -> float32 array of N elements."""
    d = {}
    d["normal"] = rng.standard_normal(N) * 0.02
    d["uniform"] = rng.uniform(-1.0, 1.0, N)
    d["heavy"] = rng.standard_t(2.0, N)
    z = rng.standard_normal(N)
    z.reshape(-1, 256)[::3] = 0.0  # every third 256-block (and so every block inside it) all zero
    z[:32] = 0.0
    d["zero_blocks"] = z
    o = rng.standard_normal(N) * 0.01
    pos = np.arange(0, N, 32) + rng.integers(0, 32, N // 32)
    o[pos] = rng.choice([-1.0, 1.0], pos.size) * rng.uniform(5.0, 100.0, pos.size)
    d["outlier"] = o
    d["tiny"] = rng.standard_normal(N) * 1e-5  # fp16 block scales become fp16 subnormals
    d["very_tiny"] = rng.standard_normal(N) * 1e-30
    d["constant"] = np.repeat(rng.standard_normal(N // 16) * 3.0, 16)
    d["ties"] = rng.integers(-24, 25, N) * 0.25  # many values exactly on rounding boundaries
    scales = np.exp(rng.uniform(-12.0, 4.0, N // 32))
    d["mixed_scales"] = rng.standard_normal(N) * np.repeat(scales, 32)
    d["huge"] = rng.standard_normal(N) * 1e4
    return {k: v.astype(np.float32) for k, v in d.items()}


SUBNORMAL = "subnormal"  # f32 subnormals: only llama.cpp's C defines the answer for these


def subnormal_input(rng):
    x = (rng.standard_normal(N) * 1e-39).astype(np.float32)
    x.reshape(-1, 32)[::4] *= np.float32(1e-4)
    return x


def random_blocks(rng, name, nblocks):
    """Random bytes for nblocks blocks of a type, with fp16 fields forced finite."""
    _, _, _, bb, f16, _ = TYPES[name]
    raw = rng.integers(0, 256, nblocks * bb, dtype=np.uint8)
    if f16 is None:  # every element an fp16: clear one exponent bit of Inf/NaN patterns
        h = raw.view(np.uint16)
        bad = (h & 0x7C00) == 0x7C00
        h[bad] &= np.uint16(0xFBFF)
    else:
        blocks = raw.reshape(nblocks, bb)
        for off in f16:
            blocks[:, off + 1] &= np.uint8(0xBF)  # exponent < 31 (bit 14 of the half clear)
    return raw


# ------------------------------------------------------------------ tests

def test_dequantize(rng):
    for name, (tid, qt, be, bb, _, _) in TYPES.items():
        nblocks = 4096 if be > 1 else 65536
        raw = random_blocks(rng, name, nblocks)
        n = nblocks * be
        mine = nb_dequantize(tid, raw, n)
        ok, why = same_floats(mine, gq.dequantize(raw, qt))
        T.check(ok, f"dequantize {name} random bytes vs gguf numpy", why)
        if ggml is None:
            T.skip(f"dequantize {name} vs ggml C", ggml_why)
            continue
        tr = ggml.ggml_get_type_traits(tid).contents
        if not tr.to_float:
            T.skip(f"dequantize {name} vs ggml C", "ggml exports no to_float for it")
            continue
        ref = np.full(n, np.nan, dtype=np.float32)
        ROWFN(tr.to_float)(ptr(raw), ptr(ref), n)
        ok, why = same_floats(mine, ref)
        T.check(ok, f"dequantize {name} random bytes vs ggml C", why)


def ggml_quantize(tid, x, nbytes):
    out = np.zeros(nbytes, dtype=np.uint8)
    got = ggml.ggml_quantize_chunk(tid, ptr(x), ptr(out), 0, x.size // ROW, ROW, None)
    assert got == nbytes, (got, nbytes)
    return out


def test_quantize(rng):
    inputs = distributions(rng)
    inputs[SUBNORMAL] = subnormal_input(rng)
    for name in QUANT_VS_GGML:
        tid, qt, be, bb, _, has_np = TYPES[name]
        for dist, x in inputs.items():
            nbytes = x.size // be * bb
            mine = nb_quantize(tid, x, nbytes)
            if ggml is None:
                T.skip(f"quantize {name} {dist} vs llama.cpp", ggml_why)
            else:
                ok, why = same_bytes(mine, ggml_quantize(tid, x, nbytes), bb)
                T.check(ok, f"quantize {name} {dist} vs llama.cpp", why)
            if has_np and dist != SUBNORMAL:
                with np.errstate(all="ignore"):
                    ref = gq.quantize(x.reshape(-1, ROW), qt)
                ok, why = same_bytes(mine, ref.view(np.uint8), bb)
                T.check(ok, f"quantize {name} {dist} vs gguf numpy", why)


class BlockQ8K(ctypes.Structure):
    _fields_ = [("d", ctypes.c_float), ("qs", ctypes.c_int8 * 256), ("bsums", ctypes.c_int16 * 16)]


def test_q8_k(rng):
    assert ctypes.sizeof(BlockQ8K) == 292
    if ggml is None:
        T.skip("q8_K vs ggml", ggml_why)
        return
    try:
        qref, dref = ggml.quantize_row_q8_K_ref, ggml.dequantize_row_q8_K
    except AttributeError:
        T.skip("q8_K vs ggml", "libggml-base does not export quantize_row_q8_K_ref")
        return
    for fn in (qref, dref):
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        fn.restype = None
    for dist, x in distributions(rng).items():
        nbytes = x.size // 256 * 292
        mine = nb_quantize(15, x, nbytes)
        ref = np.zeros(nbytes, dtype=np.uint8)  # ggml leaves bsums of an all-zero block unwritten
        qref(ptr(x), ptr(ref), x.size)
        ok, why = same_bytes(mine, ref, 292)
        T.check(ok, f"quantize q8_K {dist} vs ggml quantize_row_q8_K_ref", why)
    raw = rng.integers(0, 256, 1024 * 292, dtype=np.uint8)
    blocks = raw.reshape(1024, 292)
    blocks[:, 3] &= np.uint8(0x7F)  # the f32 d: clear the top exponent bit, so finite
    ref = np.full(1024 * 256, np.nan, dtype=np.float32)
    dref(ptr(raw), ptr(ref), ref.size)
    ok, why = same_floats(nb_dequantize(15, raw, ref.size), ref)
    T.check(ok, "dequantize q8_K random bytes vs ggml dequantize_row_q8_K", why)


def test_q8_1(rng):
    if ggml is None:
        T.skip("q8_1 vs ggml", ggml_why)
        return
    qref = ggml.quantize_row_q8_1_ref
    qref.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    qref.restype = None
    inputs = distributions(rng)
    inputs[SUBNORMAL] = subnormal_input(rng)
    for dist, x in inputs.items():
        nbytes = x.size // 32 * 36
        mine = nb_quantize(9, x, nbytes)
        ref = np.zeros(nbytes, dtype=np.uint8)
        qref(ptr(x), ptr(ref), x.size)
        ok, why = same_bytes(mine, ref, 36)
        T.check(ok, f"quantize q8_1 {dist} vs ggml quantize_row_q8_1_ref", why)


# ------------------------------------------- the FP4 options against their documented rules

E2M1_GRID = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)
UE4M3_GRID = np.array([(m / 8.0) * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7)
                       for e in range(16) for m in range(8)][:0x7F])  # codes 0..0x7E


def nearest_even(grid, v):
    """Index of the grid value nearest to each v >= 0, ties to the even index, saturating."""
    hi = np.clip(np.searchsorted(grid, v, side="left"), 1, len(grid) - 1)
    lo = hi - 1
    dlo, dhi = v - grid[lo], grid[hi] - v
    pick_hi = (dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0))
    return np.where(v >= grid[-1], len(grid) - 1, np.where(pick_hi, hi, lo))


def e2m1_codes(v):
    return (nearest_even(E2M1_GRID, np.abs(v)) | np.where(np.signbit(v), 8, 0)).astype(np.uint8)


def pack_pairs(codes, half):
    """codes (blocks, 2*half): byte j = code j (low nibble) | code j+half (high nibble)."""
    return (codes[:, :half] | (codes[:, half:] << 4)).astype(np.uint8)


def model_mxfp4_roundup(x):
    b = x.reshape(-1, 32).astype(np.float64)
    amax = np.abs(b).max(axis=1)
    m, ex = np.frexp(amax)
    e = np.where(amax > 0, np.clip(np.where(m <= 0.75, ex - 3, ex - 2) + 127, 0, 254), 0)
    codes = e2m1_codes(b / np.ldexp(1.0, e - 127)[:, None])
    return np.concatenate([e[:, None].astype(np.uint8), pack_pairs(codes, 16)], axis=1).ravel()


def model_nvfp4_2level(x):
    f32 = np.float32
    amax = np.abs(x).max()
    S = f32(f32(448.0 * 6.0) / amax) if amax > 0 else f32(1.0)
    S = min(S, np.finfo(np.float32).max)
    sub = x.reshape(-1, 16)
    target = (np.abs(sub).max(axis=1) * S / f32(6.0)).astype(np.float32)
    d = nearest_even(UE4M3_GRID, target.astype(np.float64)).astype(np.uint8)
    step = (UE4M3_GRID[d].astype(np.float32) / S).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = (sub / step[:, None]).astype(np.float32)
    codes = np.where(step[:, None] > 0, e2m1_codes(v.astype(np.float64)), 0).astype(np.uint8)
    qs = pack_pairs(codes, 8).reshape(-1, 4 * 8)
    return np.concatenate([d.reshape(-1, 4), qs], axis=1).ravel(), f32(f32(1.0) / S)


def test_fp4_options(rng):
    nb.nb_quantize_mxfp4_roundup.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    nb.nb_quantize_nvfp4_2level.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                            ctypes.POINTER(ctypes.c_float)]
    for dist, x in distributions(rng).items():
        mine = np.zeros(x.size // 32 * 17, dtype=np.uint8)
        assert nb.nb_quantize_mxfp4_roundup(ptr(x), ptr(mine), x.size) == 0
        ok, why = same_bytes(mine, model_mxfp4_roundup(x), 17)
        T.check(ok, f"mxfp4 round-up {dist} vs its documented rule (numpy model)", why)
        mine = np.zeros(x.size // 64 * 36, dtype=np.uint8)
        ts = ctypes.c_float()
        assert nb.nb_quantize_nvfp4_2level(ptr(x), ptr(mine), x.size, ctypes.byref(ts)) == 0
        ref, ref_ts = model_nvfp4_2level(x)
        ok, why = same_bytes(mine, ref, 36)
        if ok and np.float32(ts.value) != ref_ts:
            ok, why = False, f"tensor scale {ts.value!r} vs {ref_ts!r}"
        T.check(ok, f"nvfp4 two-level {dist} vs its documented rule (numpy model)", why)


def main():
    rng = np.random.default_rng(20260821)
    test_dequantize(rng)
    test_quantize(rng)
    test_q8_k(rng)
    test_q8_1(rng)
    test_fp4_options(rng)
    return T.summary()


if __name__ == "__main__":
    sys.exit(main())
