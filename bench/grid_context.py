#!/usr/bin/env python3
"""The context x KV-cell grid (`make grid`, after the recipe grid): the base and the best FP4 variants
at windows of 2048, 8192 and 32768 tokens with f16, q8_0 and q4_0 cache cells.

Each cell (variant, window, cells) is measured twice:
  - `nibble perplexity` on the first window of that length of The Jargon File: PPL, and KL divergence
    and same top token against the base's distributions with f16 cells at the same window;
  - retrieval through `nibble serve` (one slot of that window): documents of filler text from another
    part of the Jargon File, each with pass keys planted at random depths ("The pass key of Dara is
    43432. ..."), asked for one by one at the end ("What is the pass key of Dara? The pass key of Dara
    is"), greedy. A trial is right when the first number of the answer is the key. Every variant and
    cell type gets the same documents, so their accuracies are paired. The first question of a document
    pays its prefill: prefill tokens/s and time to first token come from it; the questions after it
    reuse the document (the server keeps the common prefix). Decode tokens/s counts every streamed
    token after each answer's first; peak RAM is the server's VmHWM at the end.
Accuracy is printed with its binomial standard error, sqrt(p(1 - p) / n).

Budget: about 30 minutes on 2 cores by default; the longest window measures the FP4 variants with f16
cells only unless --full. Progress goes to stdout, one line per cell. Writes the part of docs/QUALITY.md
between the context-grid markers and models/grid/context.json. Standard library only.

With --llama-server PATH, llama-server (one slot, the same window and cells; flash attention off for
f16 cells, the order nibble's -fa auto takes for them, and on for quantized cells, which need it)
answers the base's questions too, beside nibble, as a check of the long context: with f16 cells the
two sum in the same order until a sliding layer's ring wraps (docs/QUALITY.md), so their answers
may differ only where the model hesitates between keys.

Usage: python3 bench/grid_context.py [--contexts 2048,8192,32768] [--cells f16,q8_0,q4_0] [--trials 20]
                                     [--variants base,mxfp4-best,nvfp4-best] [--full] [-t N]
                                     [--llama-server build/llama-tools/bin/llama-server]
"""
import argparse
import datetime
import json
import os
import random
import re
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grid  # noqa: E402
from kv_memory import server_cmd, start, status_kib  # noqa: E402

BEGIN, END = "<!-- context-grid:begin (bench/grid_context.py writes this part) -->", "<!-- context-grid:end -->"
NAMES = ("Alice", "Bruno", "Chen", "Dara", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kofi", "Lena", "Mateo",
         "Nadia", "Oskar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Ugo", "Vera", "Wanjiru", "Ximena")
INTRO = "There is important information hidden in a lot of irrelevant text. Find it and memorize it.\n\n"
FILLER_AT = 600_000  # the filler's first character: far past the perplexity windows (32768 tokens ~ 110 KB)
ANSWER_TOKENS = 8    # five digits, a full stop and a little room
ROOT = grid.ROOT


def question(name):
    return f"\n\nWhat is the pass key of {name}? The pass key of {name} is"


def needles_per_doc(n_ctx, trials):
    """5 keys per 2048 tokens, at most `trials` in one document."""
    return max(1, min(trials, 5 * n_ctx // 2048))


def tokenize(port, text):
    body = json.dumps({"content": text, "add_special": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/tokenize", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return len(json.loads(r.read())["tokens"])


def documents(port, filler, n_ctx, trials, seed):
    """[(document, [(name, key, depth)])]: ceil(trials / k) documents of k keys each, every prompt
    (intro, document, question) at most n_ctx - ANSWER_TOKENS tokens. Sized with the server's tokenizer."""
    k = needles_per_doc(n_ctx, trials)
    longest_q = max((question(n) for n in NAMES), key=len)
    docs, off = [], FILLER_AT
    for d in range((trials + k - 1) // k):
        rng = random.Random(seed * 1000 + d)
        n = min(k, trials - d * k)
        names = rng.sample(NAMES, n)
        keys = [rng.randint(10000, 99999) for _ in names]
        want = n_ctx - ANSWER_TOKENS - 8  # room for a question that tokenizes longer than measured
        chars = int(want * 3.2)
        while True:
            body = filler[off:off + chars]
            cuts = sorted(body.rfind("\n", 0, int(rng.random() * len(body))) + 1 for _ in names)
            pieces, last, planted = [], 0, []
            for cut, name, key in zip(cuts, names, keys):
                pieces += [body[last:cut], f"The pass key of {name} is {key}. Remember it: {key} is the pass key of {name}.\n"]
                planted.append((name, key, cut / len(body)))
                last = cut
            doc = INTRO + "".join(pieces) + body[last:]
            got = tokenize(port, doc + longest_q)
            if got <= want:
                break
            chars -= int((got - want) * 3.4) + 16
        docs.append((doc, planted))
        off += chars
    return docs


def ask(port, prompt):
    """(answer text, seconds to the first token, [arrival times of each streamed token]); an answer
    that ends before any text (an end-of-text token first) counts its whole time as the first token's."""
    body = json.dumps({"prompt": prompt, "max_tokens": ANSWER_TOKENS, "temperature": 0, "stream": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"})
    t0 = time.monotonic()
    text, times = "", []
    with urllib.request.urlopen(req, timeout=3600) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            piece = json.loads(line[6:])["choices"][0].get("text", "")
            if piece:
                text += piece
                times.append(time.monotonic() - t0)
    return text, times[0] if times else time.monotonic() - t0, times


def retrieval(engine, exe, path, n_ctx, cells, docs_of, threads):
    # llama-server's f16 cells in llama.cpp's unfused order, the one nibble's -fa auto takes for them
    p, port = start(server_cmd(engine, exe, path, n_ctx, threads, cells, llama_fa="off"), engine == "nibble")
    try:
        docs = docs_of(port)
        trials, first, dec_tok, dec_s = [], [], 0, 0.0
        for doc, planted in docs:
            for i, (name, key, depth) in enumerate(planted):
                prompt = doc + question(name)
                text, ttft, times = ask(port, prompt)
                m = re.search(r"\d+", text)
                trials.append({"name": name, "key": key, "depth": round(depth, 3), "answer": text,
                               "right": bool(m and int(m.group()) == key)})
                if i == 0:
                    first.append((ttft, tokenize(port, prompt)))
                if len(times) > 1:
                    dec_tok += len(times) - 1
                    dec_s += times[-1] - times[0]
        right = sum(t["right"] for t in trials)
        ttft = sorted(first)[len(first) // 2]
        return {"trials": trials, "right": right, "n": len(trials), "ttft_s": ttft[0], "prompt_tokens": ttft[1],
                "prefill_tps": ttft[1] / ttft[0], "decode_tps": dec_tok / dec_s if dec_s else None,
                "peak_rss_mib": status_kib(p.pid, "VmHWM") / 1024}
    finally:
        p.terminate()
        p.wait(30)


def accuracy(r):
    p = r["right"] / r["n"]
    return f"{r['right']}/{r['n']} ({100 * p:.0f} ± {100 * (p * (1 - p) / r['n']) ** 0.5:.0f} %)"


def table(rows):
    head = ["window", "variant", "cells", "PPL", "KLD mean", "same top", "retrieval", "prefill t/s", "TTFT s",
            "decode t/s", "peak MiB"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cell = [str(r["n_ctx"]), r["variant"] + (", llama-server" if r["engine"] != "nibble" else ""), r["cells"]]
        if "error" in r:
            out.append("| " + " | ".join(cell) + " | " + " | ".join(["—"] * (len(head) - 4)) + f" | failed: {r['error'][:80]} |")
            continue
        p, k = r.get("ppl"), r["retrieval"]
        if not p:
            cell += ["—"] * 3
        elif "kld" not in p:
            cell += [f"{p['ppl']:.3f} ± {p['ppl_err']:.3f}", "0 (reference)", "100 %"]
        else:
            cell += [f"{p['ppl']:.3f} ± {p['ppl_err']:.3f}", f"{p['kld']:.5f} ± {p['kld_err']:.5f}", f"{100 * p['same_top']:.2f} %"]
        cell += [accuracy(k), f"{k['prefill_tps']:.0f}", f"{k['ttft_s']:.2f}", grid.fmt(k["decode_tps"], ".1f"),
                 f"{k['peak_rss_mib']:.0f}"]
        out.append("| " + " | ".join(cell) + " |")
    return "\n".join(out)


def progress(r, seconds, total_min):
    p, k = r.get("ppl"), r["retrieval"]
    return (f"@{r['n_ctx']} {r['variant']} {r['cells']}{' ' + r['engine'] if r['engine'] != 'nibble' else ''}: "
            + (f"PPL {p['ppl']:.3f}, " if p else "") + (f"KLD {p['kld']:.5f}, " if p and "kld" in p else "")
            + f"retrieval {accuracy(k)}, prefill {k['prefill_tps']:.0f} t/s, TTFT {k['ttft_s']:.2f} s, "
            f"decode {grid.fmt(k['decode_tps'], '.1f')} t/s, peak {k['peak_rss_mib']:.0f} MiB "
            f"({seconds:.0f} s; {total_min:.1f} min in all)")


def write_doc(rows, meta):
    body = [BEGIN, "",
            f"Measured {meta['date']} at commit `{meta['commit']}` on {meta['machine']}, {meta['threads']} threads; "
            f"load average at the start {meta['load']}. Perplexity: the first window of each length of {meta['text']}; "
            f"KLD against the base with f16 cells at the same window. Retrieval: {meta['trials']} pass keys per cell "
            f"({meta['docs']}), the same documents for every variant and cell type; prefill and TTFT: median over the "
            f"documents' first questions. Command: `{meta['command']}` ({meta['minutes']:.1f} minutes).", "",
            table(rows), "", END]
    text = open(grid.DOC, encoding="utf-8").read()
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + "\n".join(body) + text[text.index(END) + len(END):]
    else:
        text += "\n" + "\n".join(body) + "\n"
    tmp = grid.DOC + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, grid.DOC)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--contexts", default="2048,8192,32768")
    ap.add_argument("--cells", default="f16,q8_0,q4_0")
    ap.add_argument("--variants", default="base,mxfp4-best,nvfp4-best")
    ap.add_argument("--trials", type=int, default=20, help="pass keys per cell")
    ap.add_argument("--full", action="store_true", help="every cell type for every variant at the longest window too")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--llama-server", help="also ask llama-server (this path) the base's questions, each cell type")
    a = ap.parse_args()
    t_start, load = time.time(), "%.2f" % os.getloadavg()[0]
    nibble = os.path.join(os.environ.get("NB_BUILD", os.path.join(ROOT, "build")), "nibble")
    base = grid.fetch("fetch-model.sh")
    text_path = grid.fetch("fetch-text.sh")
    filler = open(text_path, encoding="utf-8").read()
    os.makedirs(grid.GRID, exist_ok=True)
    contexts = [int(c) for c in a.contexts.split(",")]
    cell_types = a.cells.split(",")
    if cell_types[0] != "f16":
        sys.exit("--cells: f16 comes first (the reference of KLD)")
    paths = {}
    for name in a.variants.split(","):
        spec = next((v for v in grid.VARIANTS if v[0] == name), None)
        if not spec:
            sys.exit(f"--variants: no variant {name!r} in bench/grid.py")
        imatrix = grid.build_imatrix(nibble, base, filler, a.threads, False) if "{imatrix}" in str(spec[1]) else None
        paths[name] = grid.build_variant(nibble, base, name, spec[1], grid.bits_per_weight(nibble, base), imatrix,
                                         a.threads, False)[0]
    rows, doc_cache = [], {}
    for n_ctx in contexts:
        lp = os.path.join(grid.GRID, f"base-c{n_ctx}-n1.lp")

        def docs_of(port, n_ctx=n_ctx):
            if n_ctx not in doc_cache:
                doc_cache[n_ctx] = documents(port, filler, n_ctx, a.trials, n_ctx)
            return doc_cache[n_ctx]

        for name, path in paths.items():
            for cells in cell_types:
                if n_ctx == max(contexts) and name != "base" and cells != "f16" and not a.full:
                    continue
                for engine in ["nibble"] + (["llama.cpp"] if a.llama_server and name == "base" else []):
                    t0 = time.time()
                    r = {"n_ctx": n_ctx, "engine": engine, "variant": name, "cells": cells}
                    rows.append(r)
                    try:
                        if engine == "nibble":
                            if name == "base" and cells == "f16":
                                args = ["-f", text_path, "-c", str(n_ctx), "--chunks", "1", "--save-logits", lp]
                            else:
                                args = ["--kld", lp]
                            r["ppl"] = grid.perplexity(nibble, path, args + ["-ctk", cells, "-ctv", cells], a.threads)
                        exe = nibble if engine == "nibble" else a.llama_server
                        r["retrieval"] = retrieval(engine, exe, path, n_ctx, cells, docs_of, a.threads)
                        print(progress(r, time.time() - t0, (time.time() - t_start) / 60), flush=True)
                    except Exception as e:  # one failed cell does not stop the grid
                        r["error"] = str(e).strip().splitlines()[-1] if str(e).strip() else repr(e)
                        print(f"@{n_ctx} {name} {cells} {engine}: FAILED: {e}", file=sys.stderr, flush=True)
    commit = grid.sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).stdout.strip() or "unknown"
    if grid.sh(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]).stdout.strip():
        commit += " + uncommitted changes"
    meta = {"date": datetime.date.today().isoformat(), "commit": commit,
            "machine": f"{grid.cpu_name()}, {os.cpu_count()} CPUs", "threads": a.threads, "load": load,
            "minutes": (time.time() - t_start) / 60, "text": "The Jargon File 4.4.7", "trials": a.trials,
            "docs": "keys a document: " + ", ".join(f"{needles_per_doc(c, a.trials)} at {c}" for c in contexts),
            "command": "make grid" + (f" GRID_CONTEXT_ARGS='{' '.join(sys.argv[1:])}'" if sys.argv[1:] else "")}
    with open(os.path.join(grid.GRID, "context.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    write_doc(rows, meta)
    print(table(rows))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
