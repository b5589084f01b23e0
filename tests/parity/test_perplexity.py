"""Perplexity parity: `nibble perplexity` against the same measurement made with llama.cpp.

llama.cpp's numbers come from llama-cpp-python on the same model and text, computed with
llama-perplexity's rules (tools/perplexity/perplexity.cpp): the text tokenized with BOS, cut into
windows of N_CTX tokens, each window evaluated from an empty cache with its first token replaced by
BOS, the tokens after position N_CTX/2 scored; PPL = exp(mean nll), error = PPL * stderr(nll).

Checked:
  - the two tokenizations of the text are identical (the tokens nibble saves with --save-logits);
  - the two perplexities agree within 1 %;
  - nibble's saved file, read here with numpy from the layout in src/quant/logprobs.h (an
    independent reader), holds valid records whose nll equals llama.cpp's within the engines'
    agreement, and the bucketed KL(nibble || llama.cpp) is small with the same top token mostly.
The text is a slice of The Jargon File (scripts/fetch-text.sh). Every figure is printed.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from nbctypes import ROOT, fetched, model_path  # noqa: E402
from tally import Tally  # noqa: E402

N_CTX, CHUNKS, TOP_K = 512, 4, 16
SLICE = (200_000, 215_000)  # characters of the text: about 4,500 tokens, more than 4 windows

T = Tally(verbose=True)


def fetch_text():
    with open(fetched("fetch-text.sh"), encoding="utf-8") as f:
        return f.read()[SLICE[0]:SLICE[1]]


def read_logprobs(path):
    """The --save-logits file, by the documented layout."""
    raw = open(path, "rb").read()
    assert raw[:8] == b"NBLPROB1", raw[:8]
    version, n_vocab, n_ctx, n_chunks, k, first = np.frombuffer(raw, "<u4", 6, 8)
    assert version == 1 and first == n_ctx // 2
    tokens = np.frombuffer(raw, "<i4", n_chunks * n_ctx, 64).reshape(n_chunks, n_ctx)
    rec = np.dtype([("token", "<u4"), ("zero", "<u4"), ("nll", "<f8"), ("tail", "<f8"),
                    ("top", [("id", "<u4"), ("lp", "<f4")], (int(k),))])
    n_rec = n_chunks * (n_ctx - 1 - first)
    off = 64 + 4 * n_chunks * n_ctx
    assert len(raw) == off + n_rec * rec.itemsize, (len(raw), off + n_rec * rec.itemsize)
    return int(n_vocab), tokens, np.frombuffer(raw, rec, n_rec, off)


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def main():
    from llama_cpp import Llama

    path = model_path()
    text = fetch_text()
    build = os.environ.get("NB_BUILD", os.path.join(ROOT, "build"))
    with tempfile.TemporaryDirectory() as tmp:
        txt, lp = os.path.join(tmp, "text.txt"), os.path.join(tmp, "base.lp")
        with open(txt, "w", encoding="utf-8") as f:
            f.write(text)
        run = subprocess.run([os.path.join(build, "nibble"), "perplexity", "-m", path, "-f", txt, "-c", str(N_CTX),
                              "--chunks", str(CHUNKS), "-t", "2", "--json", "--save-logits", lp, "--top-k",
                              str(TOP_K)], capture_output=True, text=True)
        if run.returncode != 0:
            T.check(False, "nibble perplexity runs", run.stderr[-2000:])
            return
        mine = json.loads(run.stdout)
        n_vocab, saved_tokens, recs = read_logprobs(lp)

    llm = Llama(model_path=path, n_ctx=N_CTX, n_batch=N_CTX, n_threads=2, logits_all=True, verbose=False)
    toks = llm.tokenize(text.encode(), add_bos=True, special=False)
    bos = llm.token_bos()
    first = N_CTX // 2
    T.check(np.array_equal(saved_tokens.ravel(), np.array(toks[:CHUNKS * N_CTX], dtype=np.int32)), "tokens",
            f"{len(toks)} tokens in the text, first {CHUNKS * N_CTX} identical to llama.cpp's")

    nll, kl, same = [], [], []
    for c in range(CHUNKS):
        win = list(toks[c * N_CTX:(c + 1) * N_CTX])
        win[0] = bos
        llm.reset()
        llm.eval(win[:N_CTX - 1])
        logp = log_softmax(np.array(llm.scores[first:N_CTX - 1], dtype=np.float32))
        nxt = np.array(toks[c * N_CTX + first + 1:(c + 1) * N_CTX])
        nll.append(-logp[np.arange(len(nxt)), nxt])
        r = recs[c * (N_CTX - 1 - first):(c + 1) * (N_CTX - 1 - first)]
        # KL(nibble || llama.cpp) over nibble's top K plus one bucket for the rest
        p = np.exp(r["top"]["lp"].astype(np.float64))
        q_top = np.take_along_axis(logp, r["top"]["id"].astype(np.int64), axis=1)
        q_rest = np.maximum(1 - np.exp(q_top).sum(axis=1), 1e-300)
        kl.append((p * (r["top"]["lp"] - q_top)).sum(axis=1) + np.where(
            r["tail"] > 0, r["tail"] * np.log(np.maximum(r["tail"], 1e-300) / q_rest), 0))
        same.append(r["top"]["id"][:, 0] == logp.argmax(axis=1))
    nll, kl, same = np.concatenate(nll), np.concatenate(kl), np.concatenate(same)
    n = len(nll)
    ppl = float(np.exp(nll.mean()))
    err = ppl * float(np.sqrt(max(0.0, (nll ** 2).mean() - nll.mean() ** 2) / (n - 1)))
    print(f"llama.cpp: PPL = {ppl:.4f} +/- {err:.4f} ({CHUNKS} windows of {N_CTX}, {n} positions)")
    print(f"nibble:    PPL = {mine['ppl']:.4f} +/- {mine['ppl_err']:.4f} ({mine['windows']} windows, "
          f"{mine['positions']} positions, {mine['tokens_per_s']:.1f} tokens/s)")
    rel = mine["ppl"] / ppl - 1
    T.check(mine["positions"] == n and len(recs) == n, "positions", f"{mine['positions']} vs {n}")
    T.check(abs(rel) < 0.01, "perplexity within 1 %", f"nibble/llama.cpp - 1 = {100 * rel:+.3f} %")
    valid = (recs["token"] == saved_tokens[:, first + 1:].ravel()).all() and (recs["zero"] == 0).all() and \
        ((recs["tail"] >= 0) & (recs["tail"] <= 1)).all() and (np.diff(recs["top"]["lp"], axis=1) <= 0).all() and \
        (recs["top"]["id"] < n_vocab).all()
    T.check(bool(valid), "saved records valid", f"{n} records of K = {TOP_K}, n_vocab {n_vocab}")
    d_nll = np.abs(recs["nll"] - nll)
    T.check(float(np.median(d_nll)) < 0.1, "saved nll vs llama.cpp",
            f"|nll_nibble - nll_llama|: median {np.median(d_nll):.4f}, max {d_nll.max():.4f}")
    T.check(float(kl.mean()) < 0.02 and float(same.mean()) > 0.9, "KL(nibble || llama.cpp)",
            f"mean {kl.mean():.5f}, p99 {np.percentile(kl, 99):.5f}, max {kl.max():.5f}; "
            f"same top token {100 * same.mean():.2f} %")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a crash is one failure, with its reason
        import traceback
        traceback.print_exc()
        T.check(False, "parity run", repr(e))
    sys.exit(T.summary())
