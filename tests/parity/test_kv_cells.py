"""KV cell types against llama.cpp's: nibble's fused attention on f16, q8_0 and q4_0 cells beside
llama.cpp's flash attention on the same cells (llama-cpp-python's type_k / type_v), on the default
model over 3 x 128 positions of varied text.

The two engines' fused attentions sum in different orders (llama.cpp: one key at a time, its V
sum in fp16 for f16 cells), so the logits are not bit-identical, and this model amplifies any
difference (llama.cpp's own two attention routes on f16 cells differ by a mean KL of 0.008). So
each cell type is held to what it costs in llama.cpp: nibble's logits on those cells may stray
from llama.cpp's default ones (f16 cells, flash attention off) at most 1.25x as far as llama.cpp's
own logits on the same cells do, plus 0.002; the distance between the two engines is printed.
Figures are printed; docs/BENCHMARKS.md records them.

A long context, f16 cells, flash attention off in both (llama.cpp's unfused order, nibble's `auto`):
the last token's logits after 8191 tokens of Jargon File prose. With every position kept in the
cache (swa_full) the two engines must be bit-identical. With the default window-sized cache of the
sliding layers they need not be, and the distance is printed: once a ring wraps, nibble keeps
position p in cell p mod ring while llama.cpp puts it into the next cell from its head that is free
or out of the window, so the window's keys can be summed in another order (they are identical at
8191 tokens, 2048 and 4096, and differ by a KL of 6e-7 at 3072; docs/QUALITY.md).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from nbctypes import Model, fetched, kl_rows, llama_logits, model_path  # noqa: E402
from tally import Tally  # noqa: E402
from test_runtime import N_POS, TEXTS  # noqa: E402

T = Tally(verbose=True)
GGML = {"f16": 1, "q8_0": 8, "q4_0": 2}  # ggml type ids, as nb_type's


def nibble_logits(path, seqs, cells):
    nb = Model(path, n_ctx=1024, n_threads=2, flash_attn=1, type_k=GGML[cells], type_v=GGML[cells])
    out = []
    for s in seqs:
        nb.reset()
        out.append(nb.eval(s))
    nb.close()
    return np.concatenate(out)


LONG = 8192


def long_context(path, text_path):
    from llama_cpp import Llama

    text = open(text_path, encoding="utf-8").read()[600_000:720_000]
    for swa_full in (True, False):
        llm = Llama(model_path=path, n_ctx=LONG, n_threads=2, n_batch=512, flash_attn=False, swa_full=swa_full,
                    verbose=False)
        toks = llm.tokenize(text.encode(), add_bos=True)[:LONG - 1]
        llm.eval(toks)
        ref = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float32)
        del llm
        nb = Model(path, n_ctx=LONG, n_threads=2, swa_full=swa_full)
        got = nb.eval(toks, all_logits=False)[0]
        nb.close()
        kl = kl_rows(ref[None], got[None])[0]
        what = f"{len(toks)} tokens, {'every position cached' if swa_full else 'sliding layers in rings'}"
        print(f"{what}: KL(llama.cpp || nibble) {kl:.3e}, max |difference| {np.abs(ref - got).max():.3e}, "
              f"same top {ref.argmax() == got.argmax()}")
        T.check(np.isfinite(got).all(), f"{what}: finite logits")
        if swa_full:
            T.check(np.array_equal(ref, got), f"{what}: logits bit-identical to llama.cpp's")


def main():
    from llama_cpp import Llama

    path = model_path()
    tok = Llama(model_path=path, vocab_only=True, verbose=False)
    seqs = [tok.tokenize(t.encode(), add_bos=True)[:N_POS] for t in TEXTS]
    base = np.concatenate(llama_logits(path, seqs, flash_attn=False)[1])
    fa16 = np.concatenate(llama_logits(path, seqs, flash_attn=True)[1])
    spread = kl_rows(base, fa16).mean()
    print(f"llama.cpp f16 cells, flash attention on vs off: mean KL {spread:.6f}")
    for cells in ("f16", "q8_0", "q4_0"):
        ref = fa16 if cells == "f16" else np.concatenate(
            llama_logits(path, seqs, flash_attn=True, type_k=GGML[cells], type_v=GGML[cells])[1])
        got = nibble_logits(path, seqs, cells)
        kl = kl_rows(ref, got)
        same = (ref.argmax(-1) == got.argmax(-1)).mean()
        to_base = kl_rows(base, ref).mean()
        print(f"{cells} cells: KL(llama.cpp || nibble) mean {kl.mean():.6f} p99 {np.percentile(kl, 99):.6f}, "
              f"same top {100 * same:.2f} %; llama.cpp's {cells} to its f16 unfused: {to_base:.6f}")
        ours = kl_rows(base, got).mean()
        print(f"{cells} cells: to llama.cpp's default logits, nibble {ours:.6f}, llama.cpp {to_base:.6f}")
        T.check(np.isfinite(got).all(), f"{cells} cells: finite logits")
        T.check(ours <= 1.25 * to_base + 0.002, f"{cells} cells: nibble's loss {ours:.6f} <= 1.25 x llama.cpp's "
                f"{to_base:.6f} + 0.002")
    long_context(path, fetched("fetch-text.sh"))
    return T.summary()


if __name__ == "__main__":
    sys.exit(main())
