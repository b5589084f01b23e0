#!/usr/bin/env python3
"""Q4_1 and Q5_1 against llama.cpp: the products, then a model's logits.

  - kernels: nb_matmul of Q4_1 / Q5_1 weights (nibble's quantizer, = llama.cpp's) against ggml's
    own x86 pair, quantize_row_q8_1 + ggml_vec_dot_q4_1_q8_1 (or _q5_1_), exported by the
    libggml-cpu that llama-cpp-python installs, one dot per (row, token): the float32 bits must be
    identical. Each of nibble's kernel sets runs it (NIBBLE_ISA=ref, avx2, avx512 in a child
    process each; a set the CPU lacks is skipped).
  - model: a tiny random-weight llama (SPM vocabulary, GQA, untied output; written here with
    gguf-py, F16 matrices) quantized by llama.cpp (llama_model_quantize, LLAMA_FTYPE_MOSTLY_Q4_1 and
    _Q5_1, so its matrices are Q4_1 or Q5_1, the output matrix Q6_K), then the same token ids through llama.cpp
    (llama-cpp-python, logits_all, n_threads 2, one batch per sequence) and nibble (nbctypes): 3
    sequences of 128 positions in one batch each, and the first again one token per call (decode).
    It prints the bit-identical positions and KL(llama.cpp || nibble), and passes when every
    position is bit-identical.
  usage: build/venv/bin/python tests/parity/test_q4_1.py [--from F16.gguf]
(--from: quantize that F16 file instead of the tiny model, e.g. a llama2-small-f16.gguf.) The last
line is "N passed, N failed[, N skipped]".
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from nbctypes import Model, kl_rows, load_lib, quiet_llama  # noqa: E402
from tally import Tally  # noqa: E402

T = Tally(verbose=True)
Q4_1, Q5_1 = 3, 7
N_SEQ, N_POS = 3, 128


def ggml_cpu():
    import llama_cpp
    lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-cpu.so"))
    lib.ggml_cpu_init()  # fills the fp16 table its kernels read
    lib.quantize_row_q8_1.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    for f in (lib.ggml_vec_dot_q4_1_q8_1, lib.ggml_vec_dot_q5_1_q8_1):
        f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                      ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return lib


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


# ------------------------------------------------------------------ kernels (a child per set)

def kernels():
    lib, g = load_lib(), ggml_cpu()
    lib.nb_quantize.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    lib.nb_matmul.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                              ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    rng = np.random.default_rng(41)
    isa = os.environ.get("NIBBLE_ISA", "best")
    for tid, name, bb, dot in ((Q4_1, "q4_1", 20, g.ggml_vec_dot_q4_1_q8_1), (Q5_1, "q5_1", 24, g.ggml_vec_dot_q5_1_q8_1)):
        for n_out, n_in, n_tok in ((37, 640, 1), (13, 2048, 7), (21, 96, 20)):
            w = (rng.standard_normal((n_out, n_in)) * rng.uniform(0.01, 3.0, (n_out, 1))).astype(np.float32)
            w += rng.uniform(-1, 1, (n_out, 1)).astype(np.float32)  # blocks with a real minimum
            x = rng.standard_normal((n_tok, n_in)).astype(np.float32)
            x[:, :32] *= np.float32(1e-3)
            wq = np.zeros(n_out * n_in // 32 * bb, dtype=np.uint8)
            assert lib.nb_quantize(tid, ptr(w), ptr(wq), w.size) == 0
            y = np.full((n_tok, n_out), np.nan, dtype=np.float32)
            assert lib.nb_matmul(None, tid, ptr(wq), n_out, n_in, ptr(x), n_tok, ptr(y)) == 0, lib.nb_last_error()
            ref = np.zeros((n_tok, n_out), dtype=np.float32)
            a = np.zeros(n_in // 32 * 36, dtype=np.uint8)
            rb = n_in // 32 * bb
            for t in range(n_tok):
                g.quantize_row_q8_1(ptr(x[t]), ptr(a), n_in)
                for o in range(n_out):
                    s = ctypes.c_float()
                    dot(n_in, ctypes.byref(s), 0, ctypes.c_void_p(wq.ctypes.data + o * rb), 0, ptr(a), 0, 1)
                    ref[t, o] = s.value
            same = int((y.view(np.uint32) == ref.view(np.uint32)).sum())
            T.check(same == y.size, f"{isa}: nb_matmul {name} {n_out}x{n_in}x{n_tok} vs ggml_vec_dot_{name}_q8_1",
                    f"{same}/{y.size} bit-identical, max |diff| {np.abs(y - ref).max():.3g}")


def kernels_all_sets():
    for isa in ("ref", "avx2", "avx512"):
        env = dict(os.environ, NIBBLE_ISA=isa)
        ver = subprocess.run([os.path.join(os.environ.get("NB_BUILD", "build"), "nibble"), "version"], env=env,
                             capture_output=True, text=True).stdout
        if f"kernels: {isa} " not in ver:
            T.skip(f"kernel set {isa}", "this CPU does not run it")
            continue
        r = subprocess.run([sys.executable, __file__, "--kernels"], env=env, capture_output=True, text=True)
        lines = r.stdout.strip().splitlines()
        for ln in lines[:-1]:
            print(ln)
        try:
            p, f = (int(w.split()[0]) for w in lines[-1].split(",")[:2])
        except (IndexError, ValueError):
            T.check(False, f"kernel set {isa}: child ran", r.stdout[-500:] + r.stderr[-2000:])
            continue
        T.passed += p
        T.failed += f


# ------------------------------------------------------------------ the model

def write_tiny(path, rng):
    """A llama: 2 layers, n_embd 256, 4 heads of 64 (2 KV heads), n_ff 512, an SPM vocabulary of 512."""
    import gguf
    E, L, H, KV, F, V, HD = 256, 2, 4, 2, 512, 512, 64
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("q4_1 parity tiny llama")
    w.add_context_length(1024)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(V)
    w.add_rope_dimension_count(HD)
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    toks += [f"\u2581w{i}" for i in range(V - len(toks))]
    types = [2, 3, 3] + [6] * 256 + [1] * (V - 259)
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([0.0] * 259 + [-float(i) for i in range(V - 259)])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) / np.sqrt(cols)).astype(np.float16)

    def norm(n, scale=1.0):
        return (scale * (1 + 0.1 * rng.standard_normal(n, dtype=np.float32))).astype(np.float32)

    w.add_tensor("token_embd.weight", mat(V, E))
    for i in range(L):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", norm(E))
        w.add_tensor(b + "attn_q.weight", mat(H * HD, E))
        w.add_tensor(b + "attn_k.weight", mat(KV * HD, E))
        w.add_tensor(b + "attn_v.weight", mat(KV * HD, E))
        w.add_tensor(b + "attn_output.weight", mat(E, H * HD))
        w.add_tensor(b + "ffn_norm.weight", norm(E))
        w.add_tensor(b + "ffn_gate.weight", mat(F, E))
        w.add_tensor(b + "ffn_up.weight", mat(F, E))
        w.add_tensor(b + "ffn_down.weight", mat(E, F))
    w.add_tensor("output_norm.weight", norm(E, 4.0))
    w.add_tensor("output.weight", mat(V, E))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(src, dst, ftype):
    import llama_cpp
    quiet_llama()
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype, p.nthread = ftype, 2
    return llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p)) == 0


def model(src, tmp, rng, name):
    import gguf
    import llama_cpp
    from llama_cpp import Llama
    q41 = os.path.join(tmp, f"{name}.gguf")
    ftype = {"Q4_1": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_1, "Q5_1": llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_1}[name]
    if not T.check(quantize(src, q41, ftype), f"llama.cpp quantizes {os.path.basename(src)} to {name}"):
        return
    kinds = {}
    for t in gguf.GGUFReader(q41).tensors:
        kinds.setdefault(t.tensor_type.name, []).append(t.name)
    print("tensor types:", {k: len(v) for k, v in kinds.items()})
    T.check(len(kinds.get(name, [])) >= 7, f"the matrices are {name}", str(kinds.keys()))
    llm = Llama(model_path=q41, n_ctx=1024, n_threads=2, logits_all=True, seed=1, verbose=False)
    n_vocab = llm.n_vocab()
    seqs = [[1] + rng.integers(3, n_vocab, N_POS - 1).tolist() for _ in range(N_SEQ)]
    ref = []
    for toks in seqs:
        llm.reset()
        llm.eval(toks)
        ref.append(np.array(llm.scores[:len(toks)], dtype=np.float32))
    llm.reset()
    for tok in seqs[0]:  # decode: one token per call (one-row products)
        llm.eval([tok])
    ref_dec = np.array(llm.scores[:len(seqs[0])], dtype=np.float32)
    del llm
    try:
        nb = Model(q41, n_ctx=1024, n_threads=2)
    except RuntimeError as e:
        T.check(False, f"nibble loads the {name} file", str(e))
        return
    nb.n_vocab = n_vocab
    mine = []
    for toks in seqs:
        nb.reset()
        mine.append(nb.eval(toks))
    nb.reset()
    mine_dec = np.concatenate([nb.eval([tok]) for tok in seqs[0]])
    nb.close()
    same = int((ref_dec.view(np.uint32) == mine_dec.view(np.uint32)).all(axis=1).sum())
    T.check(same == len(ref_dec), f"{name} decode: logits bit-identical to llama.cpp's", f"{same}/{len(ref_dec)} positions")
    R, M = np.concatenate(ref), np.concatenate(mine)
    kl = np.concatenate([kl_rows(r, m) for r, m in zip(ref, mine)])
    same = int((R.view(np.uint32) == M.view(np.uint32)).all(axis=1).sum())
    top = float((R.argmax(1) == M.argmax(1)).mean())
    print(f"{name}: llama.cpp logit std {R.std(axis=1).mean():.2f}; bit-identical {same}/{len(R)} positions; "
          f"KL(llama||nibble) mean {kl.mean():.3g} max {kl.max():.3g}; top-1 agreement {100 * top:.2f} %")
    T.check(same == len(R), f"{name} model: logits bit-identical to llama.cpp's", f"{same}/{len(R)} positions")


def main():
    if "--kernels" in sys.argv:
        kernels()
        return T.summary()
    kernels_all_sets()
    rng = np.random.default_rng(20261201)
    with tempfile.TemporaryDirectory() as tmp:
        src = sys.argv[sys.argv.index("--from") + 1] if "--from" in sys.argv else os.path.join(tmp, "tiny-f16.gguf")
        if "--from" not in sys.argv:
            write_tiny(src, rng)
        for name in ("Q4_1", "Q5_1"):
            model(src, tmp, rng, name)
    return T.summary()


if __name__ == "__main__":
    sys.exit(main())
