#!/usr/bin/env python3
"""Random-weight GGUF models of every family nibble targets, for the parity test and the benchmarks.

Each file carries the family's metadata keys and tensor names as llama.cpp's converter writes them
(convert_hf_to_gguf.py with conversion/{gemma,llama,qwen,phi}.py, gguf-py 0.19.0's constants; facts
read from the tree scripts/fetch-llama-src.sh unpacks, no code copied) and a real vocabulary: every
tokenizer.* key of llama.cpp's vocab GGUFs (models/ggml-vocab-*.gguf) or, for gemma2/gemma3, of the
default model (models/gemma-3-270m-q4_k_m.gguf), plus the family's chat template from the tree's
models/templates/ where it has one. Only the weights are made up (numpy, fixed seed per tensor name):

  matrices            N(0, 1/sqrt(n_in)), F16     norms        1 + N(0, 0.1), F32
  token_embd, output  N(0, 1/sqrt(n_embd)), F16   biases       N(0, 0.05), F32
  output_norm         OUT_NORM * (1 + N(0, 0.1)), so the logits' std is about OUT_NORM (3): the top
                      token wins by a margin (the parity test prints the margins it sees)
As in the real Gemma 3 270M (token_embd std 0.040 = 1/sqrt(640), output_norm mean 26), the scale of
the logits sits in output_norm, not in the embedding: a large embedding would dominate the residual
stream and every position would predict its own input token by a margin of ~30 logits, making the
distributions one-hot and KL blind.

Families (file stem) and what sets each apart:
  gemma3   q/k RMSNorm, post-attention / post-FFN norms, 5 local : 1 global layers, tied output
  gemma2   attention (50) and final (30) logit softcapping, alternating sliding window, post norms
  llama3   Llama-3.2 style: llama-bpe vocab, GQA, rope_freqs.weight (llama3 scaling, factor 32)
  llama2   Llama-2 / TinyLlama style: SPM vocab (llama-spm), GQA, untied output.weight
  qwen2    q/k/v biases, qwen2 BPE vocab, tied output
  qwen3    per-head q/k RMSNorm, head_dim 128 (n_head * head_dim != n_embd), tied output
  phi3     fused attn_qkv, fused ffn_up (gate rows then up rows), LongRoPE rope_factors_long/short
           with rope.scaling.attn_factor and rope.scaling.original_context_length, untied output

Shapes: `small` (tests; n_embd 256, 4-6 layers, full real vocabulary, seconds to run) and
`realistic` (benchmarks; the published HF config of the model named beside each in SHAPES).
Variants per file: f16 (F32 norms + F16 matrices, the source), q4_k_m, q5_k_m and q4_0 (llama.cpp's
own quantizer, llama_model_quantize with LLAMA_FTYPE_MOSTLY_Q4_K_M, _Q5_K_M or _Q4_0), mxfp4 and nvfp4
(`build/nibble quantize IN OUT mxfp4|nvfp4`, every weight). Unless --no-bad, three broken copies of the small q4_k_m file
per family, for the refusal checks: bad-heads (head_count 4097), bad-missing (a required tensor
dropped), bad-shape (a tensor 32 rows short, or half of a vector of <= 64 elements); BAD says which.

Output: build/families/ (ignored), names FAMILY-SHAPE-VARIANT.gguf. Idempotent: manifest.json
there records a hash of everything a file depends on; a file whose hash matches is skipped.
  usage: build/venv/bin/python tests/parity/make_family_models.py [--shape small|realistic|all]
         [--family gemma3,qwen3,...] [--variants f16,q4_k_m,q5_k_m,q4_0,mxfp4,nvfp4] [--no-bad] [--force]
         [--out DIR]
"""
import argparse
import ctypes
import functools
import hashlib
import json
import math
import os
import struct
import subprocess
import sys
import time
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "build", "families")
VERSION = 2          # bump when the weights or the layout below change
SEED = 20261201
OUT_NORM = 3.0       # output_norm's scale = the logits' standard deviation
VARIANTS = ("f16", "q4_k_m", "q5_k_m", "q4_0", "mxfp4", "nvfp4")
LLAMA_FTYPES = {"q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M", "q5_k_m": "LLAMA_FTYPE_MOSTLY_Q5_K_M",
                "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0"}  # llama.cpp's recipes

# Real hyperparameters of the named models (their HF config.json), and small test shapes of the
# same family. swa: sliding window (the small files use 64 so that 256 positions slide);
# rope: rope_theta; ctx: max_position_embeddings.
SHAPES = {
    "gemma3": {  # realistic: google/gemma-3-1b-pt
        "small": dict(n_embd=256, n_layer=6, n_head=4, n_head_kv=1, head_dim=256, n_ff=768, ctx=32768, swa=64,
                      rope=1e6, eps=1e-6),
        "realistic": dict(n_embd=1152, n_layer=26, n_head=4, n_head_kv=1, head_dim=256, n_ff=6912, ctx=32768,
                          swa=512, rope=1e6, eps=1e-6)},
    "gemma2": {  # realistic: google/gemma-2-2b (its vocabulary has 256000 tokens; these carry Gemma 3's)
        "small": dict(n_embd=256, n_layer=4, n_head=4, n_head_kv=2, head_dim=256, n_ff=768, ctx=8192, swa=64,
                      eps=1e-6, attn_cap=50.0, final_cap=30.0),
        "realistic": dict(n_embd=2304, n_layer=26, n_head=8, n_head_kv=4, head_dim=256, n_ff=9216, ctx=8192,
                          swa=4096, eps=1e-6, attn_cap=50.0, final_cap=30.0)},
    "llama3": {  # realistic: meta-llama/Llama-3.2-1B (rope_scaling llama3: factor 32, low 1, high 4, orig 8192)
        "small": dict(n_embd=256, n_layer=4, n_head=4, n_head_kv=2, head_dim=64, n_ff=768, ctx=131072,
                      rope=500000.0, eps=1e-5),
        "realistic": dict(n_embd=2048, n_layer=16, n_head=32, n_head_kv=8, head_dim=64, n_ff=8192, ctx=131072,
                          rope=500000.0, eps=1e-5)},
    "llama2": {  # realistic: TinyLlama/TinyLlama-1.1B-Chat-v1.0
        "small": dict(n_embd=256, n_layer=4, n_head=4, n_head_kv=2, n_ff=768, ctx=2048, rope=10000.0, eps=1e-5),
        "realistic": dict(n_embd=2048, n_layer=22, n_head=32, n_head_kv=4, n_ff=5632, ctx=2048, rope=10000.0,
                          eps=1e-5)},
    "qwen2": {  # realistic: Qwen/Qwen2.5-0.5B-Instruct
        "small": dict(n_embd=256, n_layer=4, n_head=4, n_head_kv=2, n_ff=768, ctx=32768, rope=1e6, eps=1e-6),
        "realistic": dict(n_embd=896, n_layer=24, n_head=14, n_head_kv=2, n_ff=4864, ctx=32768, rope=1e6, eps=1e-6)},
    "qwen3": {  # realistic: Qwen/Qwen3-0.6B
        "small": dict(n_embd=256, n_layer=4, n_head=4, n_head_kv=2, head_dim=128, n_ff=768, ctx=40960, rope=1e6,
                      eps=1e-6),
        "realistic": dict(n_embd=1024, n_layer=28, n_head=16, n_head_kv=8, head_dim=128, n_ff=3072, ctx=40960,
                          rope=1e6, eps=1e-6)},
    "phi3": {  # realistic: microsoft/Phi-3-mini-4k-instruct's shapes with Phi-3.5-mini-instruct's LongRoPE
        # (max_position_embeddings 131072, original 4096, sliding_window 262144); the factors are synthetic.
        "small": dict(n_embd=256, n_layer=4, n_head=4, n_head_kv=4, n_ff=768, ctx=131072, orig_ctx=4096,
                      rope=10000.0, eps=1e-5, swa=262144),
        "realistic": dict(n_embd=3072, n_layer=32, n_head=32, n_head_kv=32, n_ff=8192, ctx=131072, orig_ctx=4096,
                          rope=10000.0, eps=1e-5, swa=262144)},
}
ARCH = {"gemma3": "gemma3", "gemma2": "gemma2", "llama3": "llama", "llama2": "llama", "qwen2": "qwen2",
        "qwen3": "qwen3", "phi3": "phi3"}
VOCAB = {"gemma3": "gemma", "gemma2": "gemma", "llama3": "llama-bpe", "llama2": "llama-spm", "qwen2": "qwen2",
         "qwen3": "qwen2", "phi3": "phi-3"}
TEMPLATE = {"gemma2": "google-gemma-2-2b-it.jinja",
            "gemma3": "google-gemma-2-2b-it.jinja",  # the tree has no Gemma 3 template; Gemma 2's turn format
            "llama3": "meta-llama-Llama-3.2-3B-Instruct.jinja", "qwen2": "Qwen-Qwen2.5-7B-Instruct.jinja",
            "qwen3": "Qwen-Qwen3-0.6B.jinja", "phi3": None}  # phi-3's vocab carries its own
# TinyLlama-1.1B-Chat-v1.0's template (zephyr turns); the tree has none for it.
TINYLLAMA_TEMPLATE = ("{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
                      "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + "
                      "message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n"
                      "{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n"
                      "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}")
# The broken copies: the tensor each drops (one llama.cpp requires too: not output.weight, which
# falls back to token_embd) or cuts short (rewrite(): 32 rows, or half of a vector of <= 64).
BAD = {
    "gemma3": {"missing": "blk.1.attn_q_norm.weight", "shape": "blk.0.attn_k_norm.weight"},
    "gemma2": {"missing": "blk.1.post_ffw_norm.weight", "shape": "blk.0.attn_k.weight"},
    "llama3": {"missing": "blk.1.ffn_gate.weight", "shape": "rope_freqs.weight"},
    "llama2": {"missing": "blk.1.attn_v.weight", "shape": "blk.0.ffn_up.weight"},
    "qwen2": {"missing": "blk.1.ffn_down.weight", "shape": "blk.0.attn_q.bias"},
    "qwen3": {"missing": "blk.1.attn_k_norm.weight", "shape": "blk.0.attn_q_norm.weight"},
    "phi3": {"missing": "blk.1.attn_qkv.weight", "shape": "rope_factors_short.weight"},
}
BAD_HEADS = 4097


@functools.lru_cache(maxsize=None)
def llama_tree():
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fetch-llama-src.sh")], check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout
    return os.path.join(ROOT, out.strip().splitlines()[-1])


_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_NP = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1", 10: "<u8", 11: "<i8", 12: "<f8"}


def read_gguf(path):
    """A GGUF file's key/values [(key, value, type, array item type)] (strings as bytes, as the writer
    takes them) and tensor infos [(name, ne, type, offset)] and the data section's start. A small
    reader of the format: gguf-py's GGUFReader takes half a minute over a 150k-merge vocabulary."""
    from gguf import GGUFValueType as V
    with open(path, "rb") as fh:
        buf = fh.read(64 << 20)  # every vocabulary's metadata fits; tensor data is not read
    assert buf[:4] == b"GGUF", path
    n_t, n_kv = struct.unpack_from("<QQ", buf, 8)
    off = 24

    def string():
        nonlocal off
        n, = struct.unpack_from("<Q", buf, off)
        off += 8 + n
        return buf[off - n:off]

    def value(t):
        nonlocal off
        if t == 8:
            return string()
        v, = struct.unpack_from(_SCALAR[t], buf, off)
        off += struct.calcsize(_SCALAR[t])
        return v

    kv = []
    for _ in range(n_kv):
        key = string().decode()
        t, = struct.unpack_from("<I", buf, off)
        off += 4
        if t == 9:
            sub, n = struct.unpack_from("<IQ", buf, off)
            off += 12
            if sub == 8:
                v = [string() for _ in range(n)]
            else:
                a = np.frombuffer(buf, _NP[sub], n, off)
                off += a.nbytes
                v = [bool(x) for x in a] if sub == 7 else a.tolist()
            kv.append((key, v, V(t), V(sub)))
        else:
            kv.append((key, value(t), V(t), None))
    tensors = []
    for _ in range(n_t):
        name = string().decode()
        nd, = struct.unpack_from("<I", buf, off)
        ne = struct.unpack_from(f"<{nd}Q", buf, off + 4)
        t, o = struct.unpack_from("<IQ", buf, off + 4 + 8 * nd)
        off += 4 + 8 * nd + 12
        tensors.append((name, list(ne), t, o))
    align = next((v for k, v, _, _ in kv if k == "general.alignment"), 32)
    return kv, tensors, (off + align - 1) // align * align


@functools.lru_cache(maxsize=None)
def vocab_source(family):
    """The GGUF whose tokenizer.* keys the family's files carry (fetched by the repo's scripts)."""
    if VOCAB[family] == "gemma":  # the default model, scripts/fetch-model.sh
        out = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fetch-model.sh")], check=True,
                             capture_output=True, text=True, cwd=ROOT).stdout
        return os.path.join(ROOT, out.strip().splitlines()[-1])
    return os.path.join(llama_tree(), "models", f"ggml-vocab-{VOCAB[family]}.gguf")


@functools.lru_cache(maxsize=None)
def vocab_fields(family):
    """Every tokenizer.* key of the family's vocabulary, in file order, plus its chat template."""
    from gguf import GGUFValueType as V
    src = vocab_source(family)
    kv = [x for x in read_gguf(src)[0] if x[0].startswith("tokenizer.")]
    tpl = TINYLLAMA_TEMPLATE if family == "llama2" else None
    if TEMPLATE.get(family):
        with open(os.path.join(llama_tree(), "models", "templates", TEMPLATE[family]), encoding="utf-8") as fh:
            tpl = fh.read()
    if tpl is not None:
        kv = [x for x in kv if x[0] != "tokenizer.chat_template"] + [("tokenizer.chat_template", tpl, V.STRING, None)]
    n_vocab = len(next(x[1] for x in kv if x[0] == "tokenizer.ggml.tokens"))
    return kv, n_vocab, src


def llama3_rope_factors(head_dim, base, factor=32.0, low=1.0, high=4.0, orig=8192):
    """The per-frequency divisors llama.cpp's converter stores as rope_freqs.weight for rope_type llama3."""
    out = []
    for i in range(0, head_dim, 2):
        wavelen = 2 * math.pi * base ** (i / head_dim)
        if wavelen < orig / high:
            out.append(1.0)
        elif wavelen > orig / low:
            out.append(factor)
        else:
            smooth = (orig / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def metadata(family, s, n_vocab):
    """The family's hyperparameter keys, as its converter class writes them: [(key, value, type)]."""
    from gguf import GGUFValueType as V
    a = ARCH[family]
    hd = s.get("head_dim", s["n_embd"] // s["n_head"])
    u, f = V.UINT32, V.FLOAT32
    kv = [(f"{a}.context_length", s["ctx"], u), (f"{a}.embedding_length", s["n_embd"], u),
          (f"{a}.block_count", s["n_layer"], u), (f"{a}.feed_forward_length", s["n_ff"], u),
          (f"{a}.attention.head_count", s["n_head"], u), (f"{a}.attention.head_count_kv", s["n_head_kv"], u)]
    if family == "phi3":  # Phi3MiniModel.set_gguf_parameters, then its generate_extra_tensors' attn factor
        scale = s["ctx"] / s["orig_ctx"]
        kv += [(f"{a}.rope.scaling.original_context_length", s["orig_ctx"], u),
               (f"{a}.attention.layer_norm_rms_epsilon", s["eps"], f), (f"{a}.rope.dimension_count", hd, u),
               (f"{a}.rope.freq_base", s["rope"], f), (f"{a}.attention.sliding_window", s["swa"], u),
               (f"{a}.rope.scaling.attn_factor", math.sqrt(1 + math.log(scale) / math.log(s["orig_ctx"])), f)]
    elif family == "gemma2":  # Gemma2Model.set_gguf_parameters (no rope key: llama.cpp's default 10000)
        kv += [(f"{a}.attention.layer_norm_rms_epsilon", s["eps"], f), (f"{a}.attention.key_length", hd, u),
               (f"{a}.attention.value_length", hd, u), (f"{a}.attn_logit_softcapping", s["attn_cap"], f),
               (f"{a}.final_logit_softcapping", s["final_cap"], f), (f"{a}.attention.sliding_window", s["swa"], u)]
    elif family == "gemma3":  # as in the default model's file
        kv += [(f"{a}.attention.layer_norm_rms_epsilon", s["eps"], f), (f"{a}.attention.key_length", hd, u),
               (f"{a}.attention.value_length", hd, u), (f"{a}.rope.freq_base", s["rope"], f),
               (f"{a}.attention.sliding_window", s["swa"], u)]
    else:  # TextModel.set_gguf_parameters (+ LlamaModel's vocab_size and rope.dimension_count)
        kv += [(f"{a}.rope.freq_base", s["rope"], f), (f"{a}.attention.layer_norm_rms_epsilon", s["eps"], f)]
        if "head_dim" in s:  # only where the HF config names head_dim
            kv += [(f"{a}.attention.key_length", hd, u), (f"{a}.attention.value_length", hd, u)]
        if a == "llama":
            kv += [(f"{a}.vocab_size", n_vocab, u), (f"{a}.rope.dimension_count", hd, u)]
    return kv


def tensor_plan(family, s, n_vocab):
    """[(name, numpy shape (rows, cols) = GGUF (ne1, ne0) reversed, kind)] in the converter's order."""
    e, hd, L = s["n_embd"], s.get("head_dim", s["n_embd"] // s["n_head"]), s["n_layer"]
    q, kv, ff = s["n_head"] * hd, s["n_head_kv"] * hd, s["n_ff"]
    plan = []
    if family == "llama3":
        plan.append(("rope_freqs.weight", (hd // 2,), "llama3_freqs"))
    if family == "phi3":
        plan += [("rope_factors_long.weight", (hd // 2,), "long"), ("rope_factors_short.weight", (hd // 2,), "short")]
    plan.append(("token_embd.weight", (n_vocab, e), "embed"))
    for i in range(L):
        b = f"blk.{i}."
        plan.append((b + "attn_norm.weight", (e,), "norm"))
        if family == "phi3":
            plan.append((b + "attn_qkv.weight", (q + 2 * kv, e), "matrix"))
        else:
            plan += [(b + "attn_q.weight", (q, e), "matrix"), (b + "attn_k.weight", (kv, e), "matrix"),
                     (b + "attn_v.weight", (kv, e), "matrix")]
        if family == "qwen2":
            plan += [(b + "attn_q.bias", (q,), "bias"), (b + "attn_k.bias", (kv,), "bias"),
                     (b + "attn_v.bias", (kv,), "bias")]
        if family in ("qwen3", "gemma3"):
            plan += [(b + "attn_q_norm.weight", (hd,), "norm"), (b + "attn_k_norm.weight", (hd,), "norm")]
        plan.append((b + "attn_output.weight", (e, q), "matrix"))
        if family in ("gemma2", "gemma3"):
            plan.append((b + "post_attention_norm.weight", (e,), "norm"))
        plan.append((b + "ffn_norm.weight", (e,), "norm"))
        if family == "phi3":
            plan.append((b + "ffn_up.weight", (2 * ff, e), "matrix"))  # gate rows, then up rows
        else:
            plan += [(b + "ffn_gate.weight", (ff, e), "matrix"), (b + "ffn_up.weight", (ff, e), "matrix")]
        plan.append((b + "ffn_down.weight", (e, ff), "matrix"))
        if family in ("gemma2", "gemma3"):
            plan.append((b + "post_ffw_norm.weight", (e,), "norm"))
    plan.append(("output_norm.weight", (e,), "out_norm"))
    if family in ("llama2", "phi3"):  # the others tie the output to token_embd
        plan.append(("output.weight", (n_vocab, e), "embed"))
    return plan


def make_tensor(family, s, name, shape, kind):
    rng = np.random.default_rng([SEED, zlib.crc32(f"{family}/{name}".encode())])
    if kind == "matrix":
        return (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(shape[1])).astype(np.float16)
    if kind == "embed":
        return (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(shape[1])).astype(np.float16)
    if kind == "out_norm":
        return (OUT_NORM * (1 + 0.1 * rng.standard_normal(shape, dtype=np.float32))).astype(np.float32)
    if kind == "norm":
        return (1 + 0.1 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
    if kind == "bias":
        return (0.05 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
    if kind == "llama3_freqs":
        return llama3_rope_factors(2 * shape[0], s["rope"])
    x = np.linspace(0.0, 1.0, shape[0], dtype=np.float32)
    if kind == "short":  # LongRoPE short factors: 1 at high frequencies rising to ~2 (synthetic)
        return (1 + x ** 2).astype(np.float32)
    return np.exp(np.log(1.1) + x * (np.log(64.0) - np.log(1.1))).astype(np.float32)  # long: 1.1 .. 64


def write_f16(family, shape_name, path):
    """The F16 source file, written tensor by tensor (a realistic file never sits in memory whole)."""
    import gguf
    from gguf import GGUFValueType as V
    s = SHAPES[family][shape_name]
    vocab, n_vocab, _ = vocab_fields(family)
    w = gguf.GGUFWriter(None, ARCH[family])
    w.add_key_value("general.type", "model", V.STRING)
    w.add_key_value("general.name", f"nibble random {family} {shape_name}", V.STRING)
    for k, v, t in metadata(family, s, n_vocab):
        w.add_key_value(k, v, t)
    w.add_key_value("general.file_type", int(gguf.LlamaFileType.MOSTLY_F16), V.UINT32)
    for k, v, t, sub in vocab:
        w.add_key_value(k, v, t, sub)
    w.add_key_value("general.quantization_version", gguf.GGML_QUANT_VERSION, V.UINT32)
    plan = tensor_plan(family, s, n_vocab)
    for name, shp, kind in plan:
        dt = np.float16 if kind in ("matrix", "embed") else np.float32
        w.add_tensor_info(name, shp, np.dtype(dt), int(np.prod(shp)) * np.dtype(dt).itemsize)
    tmp = path + ".tmp"
    w.write_header_to_file(path=tmp)
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shp, kind in plan:
        w.write_tensor_data(make_tensor(family, s, name, shp, kind))
    w.close()
    os.replace(tmp, path)


def quantize(src, dst, variant, threads=2):
    tmp = dst + ".tmp"
    if variant in LLAMA_FTYPES:  # llama.cpp's quantizer, as bench/quantize_vs_llama.py calls it
        import llama_cpp
        from nbctypes import quiet_llama
        quiet_llama()
        p = llama_cpp.llama_model_quantize_default_params()
        p.ftype, p.nthread = getattr(llama_cpp, LLAMA_FTYPES[variant]), threads
        if llama_cpp.llama_model_quantize(src.encode(), tmp.encode(), ctypes.byref(p)) != 0:
            raise RuntimeError(f"llama.cpp could not quantize {src}")
    else:
        nibble = os.path.join(os.environ.get("NB_BUILD", os.path.join(ROOT, "build")), "nibble")
        r = subprocess.run([nibble, "quantize", src, tmp, variant, "-t", str(threads)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"nibble quantize {variant} {src}: {(r.stderr or r.stdout).strip()}")
    os.replace(tmp, dst)


def rewrite(src, dst, set_kv=None, drop=None, shrink=None, add_kv=()):
    """A copy of src with one key changed, keys added ((key, value, GGUFValueType) each), one tensor
    dropped or one tensor's last rows (elements, for a vector) cut; tensor data copied as bytes."""
    import gguf
    kv, tensors, data0 = read_gguf(src)
    arch = next(v for k, v, _, _ in kv if k == "general.architecture").decode()
    w = gguf.GGUFWriter(None, arch)
    for k, v, t, sub in kv:
        if k != "general.architecture":
            w.add_key_value(k, set_kv[1] if set_kv and k == set_kv[0] else v, t, sub)
    for k, v, t in add_kv:
        w.add_key_value(k, v, t)
    keep = []
    for name, ne, t, o in tensors:
        if name == drop:
            continue
        bs, ts = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(t)]
        nbytes = int(np.prod(ne)) // bs * ts
        if name == shrink:  # 32 rows (elements) fewer; half of a vector of <= 64 (phi3's 32 factors)
            ne = ne[:-1] + [ne[-1] - (32 if ne[-1] > 64 else ne[-1] // 2)]
            nbytes = int(np.prod(ne)) // bs * ts  # rows (or elements) are contiguous: keep the first ones
        w.add_tensor_info(name, list(reversed(ne)), np.dtype(np.float32), nbytes, raw_dtype=gguf.GGMLQuantizationType(t))
        keep.append((o, nbytes))
    tmp = dst + ".tmp"
    w.write_header_to_file(path=tmp)
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    with open(src, "rb") as fh:
        for o, nbytes in keep:
            fh.seek(data0 + o)
            w.write_tensor_data(np.frombuffer(fh.read(nbytes), np.uint8))
    w.close()
    os.replace(tmp, dst)


def yarn_keys(family):
    """The `yarn` variant: the Q4_K_M file with YaRN scaling (factor 4 over an original context of
    256), as Qwen's long-context configs set it; only its RoPE differs."""
    import gguf
    a, T = ARCH[family], gguf.GGUFValueType
    return [(f"{a}.rope.scaling.type", "yarn", T.STRING), (f"{a}.rope.scaling.factor", 4.0, T.FLOAT32),
            (f"{a}.rope.scaling.original_context_length", 256, T.UINT32)]


def fingerprint(family, shape_name, variant):
    """What a file depends on: this script's VERSION, seed and shapes, the vocabulary file, the recipe."""
    vsrc = vocab_source(family)
    st = os.stat(vsrc)
    spec = dict(v=VERSION, seed=SEED, out_norm=OUT_NORM, family=family, shape=SHAPES[family][shape_name],
                variant=variant, vocab=[os.path.basename(vsrc), st.st_size], tpl=TEMPLATE.get(family))
    if variant.startswith("bad"):
        spec.update(bad=BAD[family], heads=BAD_HEADS, rule=2)  # rule: bump when rewrite()'s cuts change
    if variant == "yarn":
        spec.update(yarn=[(k, v) for k, v, _ in yarn_keys(family)])
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def path_of(family, shape_name, variant, out=OUT):
    return os.path.join(out, f"{family}-{shape_name}-{variant}.gguf")


def ensure(families=None, shapes=("small",), variants=VARIANTS, bad=True, force=False, out=OUT, log=print):
    """Makes what is missing or stale; returns {(family, shape, variant): path} and a list of what it did."""
    os.makedirs(out, exist_ok=True)
    man_path = os.path.join(out, "manifest.json")
    manifest = json.load(open(man_path)) if os.path.exists(man_path) else {}
    paths, done = {}, []
    for family in families or SHAPES:
        for shape_name in shapes:
            need = list(variants)
            if bad and shape_name == "small":
                need += [v for v in ("bad-heads", "bad-missing", "bad-shape") if v not in need]
            if any(v != "f16" for v in need) and "f16" not in need:
                need.insert(0, "f16")
            if any(v.startswith("bad") or v == "yarn" for v in need) and "q4_k_m" not in need:
                need.insert(1, "q4_k_m")
            for variant in need:
                p = path_of(family, shape_name, variant, out)
                fp = fingerprint(family, shape_name, variant)
                paths[(family, shape_name, variant)] = p
                if not force and os.path.exists(p) and manifest.get(os.path.basename(p)) == fp:
                    continue
                t0 = time.perf_counter()
                a = ARCH[family]
                q4 = path_of(family, shape_name, "q4_k_m", out)
                if variant == "f16":
                    write_f16(family, shape_name, p)
                elif variant == "bad-heads":
                    rewrite(q4, p, set_kv=(f"{a}.attention.head_count", BAD_HEADS))
                elif variant == "bad-missing":
                    rewrite(q4, p, drop=BAD[family]["missing"])
                elif variant == "bad-shape":
                    rewrite(q4, p, shrink=BAD[family]["shape"])
                elif variant == "yarn":
                    rewrite(q4, p, add_kv=yarn_keys(family))
                else:
                    quantize(path_of(family, shape_name, "f16", out), p, variant)
                manifest = json.load(open(man_path)) if os.path.exists(man_path) else {}  # another run's too
                manifest[os.path.basename(p)] = fp
                with open(man_path + ".tmp", "w") as fh:
                    json.dump(manifest, fh, indent=1, sort_keys=True)
                os.replace(man_path + ".tmp", man_path)
                dt = time.perf_counter() - t0
                done.append((os.path.basename(p), os.path.getsize(p), dt))
                log(f"  wrote {os.path.basename(p)}: {os.path.getsize(p) / 2**20:.1f} MiB in {dt:.1f} s")
    return paths, done


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="small", choices=["small", "realistic", "all"])
    ap.add_argument("--family", default=",".join(SHAPES))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--no-bad", action="store_true")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    shapes = ("small", "realistic") if a.shape == "all" else (a.shape,)
    fams = a.family.split(",")
    for f in fams:
        if f not in SHAPES:
            sys.exit(f"unknown family {f!r}; known: {', '.join(SHAPES)}")
    t0 = time.perf_counter()
    _, done = ensure(fams, shapes, a.variants.split(","), not a.no_bad, a.force, a.out)
    print(f"{len(done)} files written ({sum(d[1] for d in done) / 2**20:.0f} MiB) in {time.perf_counter() - t0:.1f} s"
          f" under {a.out}; the others were up to date")


if __name__ == "__main__":
    main()
