"""Where nibble and llama.cpp part: the same tokens through both engines, layer by layer.

llama.cpp's eval callback (cb_eval) hands over its named intermediate tensors; nibble's observer
hands over the input of every weight matrix product. Four of those are the same quantity in both:
  attn_norm  the normed input of the attention (input of attn_q)
  kqv_out    the attention output (input of attn_output)
  ffn_norm   the normed input of the feed-forward (input of ffn_gate)
  ffn_geglu  GELU(gate) * up (input of ffn_down)
For each layer and position it prints the largest absolute difference (0 = bit-identical), then the
KL divergence of the two engines' next-token distributions per position. Batched evaluation (one
call, as a prompt) by default; --sequential feeds one token per call, as decode does. Usage:
  build/venv/bin/python bench/trace_llama.py [-m MODEL] [-p TEXT] [-n TOKENS] [--layers N] [--sequential]
"""
import argparse
import ctypes
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
from nbctypes import Model, kl_rows, model_path  # noqa: E402

# llama.cpp tensor name -> nibble weight whose input is the same quantity
PAIRS = [("attn_norm", "attn_q"), ("kqv_out", "attn_output"), ("ffn_norm", "ffn_gate"), ("ffn_geglu", "ffn_down")]
GGML_F32, GGML_F16 = 0, 1


def ggml_array(lib, t):
    """A ggml_tensor's values as float32 (F32 or F16 tensors; views through their strides)."""
    ty = ctypes.cast(t, ctypes.POINTER(ctypes.c_int32))[0]  # struct ggml_tensor: type, buffer, ne[4], nb[4]
    if ty not in (GGML_F32, GGML_F16):
        return None
    ne = [ctypes.cast(t + 16, ctypes.POINTER(ctypes.c_int64))[i] for i in range(4)]
    nb = [ctypes.cast(t + 48, ctypes.POINTER(ctypes.c_uint64))[i] for i in range(4)]
    size = 4 if ty == GGML_F32 else 2
    span = sum((n - 1) * b for n, b in zip(ne, nb)) + size
    raw = (ctypes.c_uint8 * span).from_address(lib.ggml_get_data(t))
    flat = np.frombuffer(raw, dtype=np.float32 if ty == GGML_F32 else np.float16)
    return np.lib.stride_tricks.as_strided(flat, shape=ne[::-1], strides=nb[::-1]).astype(np.float32)


def llama_trace(path, toks, sequential, layers):
    """llama.cpp's tensors of PAIRS in the first layers (one row per token) and logits."""
    import llama_cpp as L
    base = ctypes.CDLL(os.path.join(os.path.dirname(L.__file__), "lib", "libggml-base.so"))
    base.ggml_get_name.restype, base.ggml_get_name.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
    base.ggml_get_data.restype, base.ggml_get_data.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    rows = {}
    wanted = {f"{name}-{il}" for name, _ in PAIRS for il in range(layers)}

    @L.ggml_backend_sched_eval_callback
    def seen(t, ask, _user):
        name = base.ggml_get_name(t).decode()
        if ask:
            return name in wanted
        a = ggml_array(base, t)
        if name in wanted and a is not None:
            rows.setdefault(name, []).append(a.reshape(-1, a.shape[-1]))
        return True

    L.llama_backend_init()
    model = L.llama_model_load_from_file(path.encode(), L.llama_model_default_params())
    cp = L.llama_context_default_params()
    cp.n_ctx = cp.n_batch = cp.n_ubatch = max(64, len(toks))
    cp.n_threads = cp.n_threads_batch = 1
    cp.flash_attn_type = 0  # off: llama-cpp-python's default, the reference of tests/parity
    cp.cb_eval, cp.cb_eval_user_data = seen, None
    ctx = L.llama_init_from_model(model, cp)
    n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    logits = []
    for chunk in ([[t] for t in toks] if sequential else [toks]):
        batch = L.llama_batch_init(len(chunk), 0, 1)
        for i, tok in enumerate(chunk):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = tok, len(logits) + i, 1
            batch.seq_id[i][0], batch.logits[i] = 0, 1
        batch.n_tokens = len(chunk)
        if L.llama_decode(ctx, batch) != 0:
            sys.exit("llama_decode failed")
        for i in range(len(chunk)):
            logits.append(np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, i), shape=(n_vocab,)).copy())
        L.llama_batch_free(batch)
    L.llama_free(ctx)
    L.llama_model_free(model)
    return {k: np.concatenate(v) for k, v in rows.items()}, np.array(logits)


def nibble_trace(path, toks, sequential):
    m = Model(path, n_ctx=max(64, len(toks)), n_threads=1)
    rows = {}
    m.observe(lambda name, x: rows.setdefault(name, []).append(x))
    logits = np.concatenate([m.eval([t]) for t in toks]) if sequential else m.eval(toks)
    m.close()
    return {k: np.concatenate(v) for k, v in rows.items()}, logits


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default=None)
    ap.add_argument("-p", "--prompt", default="The first practical bicycle was sold in England in 1887.")
    ap.add_argument("-n", "--tokens", type=int, default=6)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--sequential", action="store_true")
    a = ap.parse_args()
    path = a.model or model_path()
    import llama_cpp as L
    vocab = L.Llama(model_path=path, vocab_only=True, verbose=False)
    toks = vocab.tokenize(a.prompt.encode(), add_bos=True)[:a.tokens]
    ll, ll_logits = llama_trace(path, toks, a.sequential, a.layers)
    nb, nb_logits = nibble_trace(path, toks, a.sequential)
    print(f"{len(toks)} tokens, {'one per call' if a.sequential else 'one batch'}; largest |llama.cpp - nibble| "
          "per position (0 = bit-identical)")
    for il in range(a.layers):
        for lname, weight in PAIRS:
            x, y = ll[f"{lname}-{il}"], nb[f"blk.{il}.{weight}.weight"]
            diffs = " ".join(f"{float(np.abs(x[t] - y[t]).max()):8.2g}" for t in range(len(toks)))
            print(f"layer {il:2d} {lname:10s} {diffs}")
    kl = kl_rows(ll_logits, nb_logits)
    print("KL(llama.cpp || nibble) " + " ".join(f"{k:.2g}" for k in kl))
    print("max |logit difference|  " + " ".join(f"{float(np.abs(ll_logits[t] - nb_logits[t]).max()):.2g}"
                                                 for t in range(len(toks))))


if __name__ == "__main__":
    main()
