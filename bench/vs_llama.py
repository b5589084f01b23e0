"""nibble against llama.cpp (llama-cpp-python) on the same GGUF, same threads, alternating runs.

For each engine and run, a fresh process: load the model, evaluate the prompt once to warm up (as
llama-bench does) and forget it, evaluate the P-token prompt in one call (prefill, "ppP"), then
generate G tokens greedily one at a time ("tgG"), ignoring end-of-sequence.
Prints tokens/s (median, min..max over runs), the nibble/llama.cpp ratio, time to first token
(prefill plus the first sampled token) and peak resident memory of the process (both processes
carry the same Python + numpy overhead). Any GGUF both engines load will do: the prompt is the
model's BOS token and random ids of its own vocabulary (read once by llama.cpp's vocab-only load).
Usage:
  build/venv/bin/python bench/vs_llama.py [-m MODEL] [-t 1,2] [-p 512] [-n 128] [-r 5] [-o md|json] [--flash-attn]
      [--llama-bench PATH [--llama-bench-args "ARGS"]] [--fast-prefill]
Run it with and without --flash-attn, which both engines follow (nibble's fused attention, or its
unfused order that llama.cpp's bits need): each engine's better pass is the figure to set beside
the other's.
--fast-prefill adds nibble with its block-summed prefill (nb_ctx_params.fast_prefill) as a third
engine in the same alternation (its decode is the default's: one token takes llama.cpp's order).
--llama-bench PATH measures the llama.cpp side with its own llama-bench instead (a native build:
scripts/build-llama-tools.sh; llama-cpp-python's wheel is the portable AVX2 build the parity tests
need): ppP on an empty context and tgG at depth P (-d P), as nibble's decode follows its prompt;
its time to first token is then P / ppP, without the first sampled token. --llama-bench-args adds
llama-bench options to both of its runs (e.g. "--repack 0" where its AMX repacking crashes).
The families' random-weight files (tests/parity/make_family_models.py --shape realistic --variants
q4_k_m) are benchmarked the same way: -m build/families/qwen3-realistic-q4_k_m.gguf.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def vocab(model):
    """(n_vocab, BOS id) of the model, from llama.cpp's vocab-only load."""
    import llama_cpp as L
    llm = L.Llama(model_path=model, vocab_only=True, verbose=False)
    return llm.n_vocab(), llm.token_bos()


def child(engine, model, threads, n_prompt, n_gen, n_vocab, bos, flash_attn):
    """Runs in a fresh process; prints one JSON line."""
    import numpy as np
    rng = np.random.default_rng(1234)
    # ids 1000 .. 200000 (for Gemma's 262144-token vocabulary, the same prompt as before families)
    prompt = [bos] + [int(t) for t in rng.integers(min(1000, n_vocab // 8), min(200000, n_vocab - 256), n_prompt - 1)]
    t0 = time.perf_counter()
    if engine.startswith("nibble"):
        sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
        from nbctypes import Model
        m = Model(model, n_ctx=n_prompt + n_gen + 16, n_threads=threads, flash_attn=flash_attn,
                  fast_prefill=engine == "nibble-block")
        m.eval(prompt, all_logits=False)  # a warm-up pass, as llama-bench makes one
        m.reset()
        t1 = time.perf_counter()
        logits = m.eval(prompt, all_logits=False)
        tok = int(logits[0].argmax())
        t2 = time.perf_counter()
        for _ in range(n_gen - 1):
            tok = int(m.eval([tok], all_logits=False)[0].argmax())
        t3 = time.perf_counter()
    else:
        import llama_cpp as L
        llm = L.Llama(model_path=model, n_ctx=n_prompt + n_gen + 16, n_batch=n_prompt, n_ubatch=n_prompt,
                      n_threads=threads, n_threads_batch=threads, flash_attn=flash_attn, verbose=False)
        last = lambda: int(np.argmax(np.ctypeslib.as_array(L.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))))
        llm.eval(prompt)  # the same warm-up pass
        llm.reset()
        llm._ctx.kv_cache_clear()
        t1 = time.perf_counter()
        llm.eval(prompt)
        tok = last()
        t2 = time.perf_counter()
        for _ in range(n_gen - 1):
            llm.eval([tok])
            tok = last()
        t3 = time.perf_counter()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"load_s": t1 - t0, "pp": n_prompt / (t2 - t1), "ttft_s": t2 - t1,
                      "tg": (n_gen - 1) / (t3 - t2), "rss": rss}))


def llama_bench(a, threads):
    """llama-bench's pp and tg (one repetition each) as a child's JSON row; runs in a child, so
    that its children's peak RSS is llama-bench's alone."""
    fa = "on" if a.flash_attn else "off"
    base = [a.llama_bench, "-m", a.model, "-t", str(threads), "-fa", fa, "-r", "1", "-o", "json"] + a.llama_bench_args.split()
    rows = {}
    for test, args in (("pp", ["-p", str(a.prompt), "-n", "0"]), ("tg", ["-p", "0", "-n", str(a.gen), "-d", str(a.prompt)])):
        out = subprocess.run(base + args, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"llama-bench on {a.model}: {(out.stderr.strip().splitlines() or ['exit %d' % out.returncode])[-1]}")
        rows[test] = json.loads(out.stdout)[0]["avg_ts"]
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps({"load_s": 0, "pp": rows["pp"], "ttft_s": a.prompt / rows["pp"], "tg": rows["tg"], "rss": rss}))


def run_child(engine, a, threads):
    out = subprocess.run([sys.executable, __file__, "--child", engine, "-m", a.model, "-t", str(threads),
                          "-p", str(a.prompt), "-n", str(a.gen), "--vocab", f"{a.n_vocab},{a.bos}"] +
                         (["--llama-bench", a.llama_bench, "--llama-bench-args=" + a.llama_bench_args] if a.llama_bench else []) +
                         (["--flash-attn"] if a.flash_attn else []),
                         capture_output=True, text=True)
    if out.returncode != 0:  # e.g. an engine refusing the file: say why
        sys.exit(f"{engine} on {a.model}: {(out.stderr.strip().splitlines() or ['exit %d' % out.returncode])[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(xs):
    return statistics.median(xs), min(xs), max(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child")
    ap.add_argument("-m", "--model")
    ap.add_argument("-t", "--threads", default="1,2")
    ap.add_argument("-p", "--prompt", type=int, default=512)
    ap.add_argument("-n", "--gen", type=int, default=128)
    ap.add_argument("-r", "--reps", type=int, default=5)
    ap.add_argument("-o", "--output", default="md", choices=["md", "json"])
    ap.add_argument("--flash-attn", action="store_true", help="both engines with flash attention (default off)")
    ap.add_argument("--llama-bench", help="the llama.cpp side by this llama-bench binary (a native build)")
    ap.add_argument("--llama-bench-args", default="", help="more llama-bench options, one string")
    ap.add_argument("--fast-prefill", action="store_true",
                    help="also nibble with nb_ctx_params.fast_prefill (NB_ROUTE_BLOCK), in the same alternation")
    ap.add_argument("--vocab", help=argparse.SUPPRESS)  # n_vocab,bos: the parent tells its children
    a = ap.parse_args()
    if not a.model:
        a.model = subprocess.run(["bash", os.path.join(ROOT, "scripts/fetch-model.sh")], check=True,
                                 capture_output=True, text=True).stdout.strip().splitlines()[-1]
    if a.child == "llama" and a.llama_bench:
        llama_bench(a, int(a.threads))
        return
    if a.child:
        n_vocab, bos = (int(x) for x in a.vocab.split(","))
        child(a.child, a.model, int(a.threads), a.prompt, a.gen, n_vocab, bos, a.flash_attn)
        return
    a.n_vocab, a.bos = vocab(a.model)
    rows = []
    engines = {"nibble": "nibble", "llama.cpp": "llama"}  # table name: child name
    if a.fast_prefill:
        engines = {"nibble": "nibble", "nibble-block": "nibble-block", "llama.cpp": "llama"}
    for threads in [int(t) for t in a.threads.split(",")]:
        res = {eng: [] for eng in engines}
        for _ in range(a.reps):  # alternate so all see the same machine conditions
            for eng, name in engines.items():
                res[eng].append(run_child(name, a, threads))
        for metric, label in (("pp", f"pp{a.prompt}"), ("tg", f"tg{a.gen}")):
            ll = summary([r[metric] for r in res["llama.cpp"]])
            for eng in engines:
                if eng == "llama.cpp" or (eng == "nibble-block" and metric == "tg"):  # decode is one token: the same route
                    continue
                nb = summary([r[metric] for r in res[eng]])
                rows.append({"threads": threads, "test": label + (" --fast-prefill" if eng == "nibble-block" else ""),
                             "nibble": nb, "llama.cpp": ll, "ratio": nb[0] / ll[0]})
        for eng in res:
            rows.append({"threads": threads, "test": f"ttft+rss {eng}",
                         "ttft_ms": 1e3 * statistics.median(r["ttft_s"] for r in res[eng]),
                         "rss_mib": max(r["rss"] for r in res[eng]) / 2**20})
    if a.output == "json":
        print(json.dumps(rows, indent=1))
        return
    print(f"model {os.path.basename(a.model)}, {a.reps} alternating runs per engine, median (min..max); "
          f"flash attention {'on' if a.flash_attn else 'off'} (both engines)"
          f"{', llama.cpp by ' + a.llama_bench if a.llama_bench else ''}"
          f"{' ' + a.llama_bench_args if a.llama_bench and a.llama_bench_args else ''}\n")
    print("| threads | test | nibble tok/s | llama.cpp tok/s | ratio |")
    print("|---|---|---|---|---|")
    for r in rows:
        if "ratio" in r:
            f = lambda s: f"{s[0]:.1f} ({s[1]:.1f}..{s[2]:.1f})"
            print(f"| {r['threads']} | {r['test']} | {f(r['nibble'])} | {f(r['llama.cpp'])} | {r['ratio']:.2f} |")
    print("\n| threads | engine | time to first token ms | peak RSS MiB |")
    print("|---|---|---|---|")
    for r in rows:
        if "ttft_ms" in r:
            print(f"| {r['threads']} | {r['test'].split()[-1]} | {r['ttft_ms']:.0f} | {r['rss_mib']:.0f} |")


if __name__ == "__main__":
    main()
