#!/usr/bin/env python3
"""The quality grid (`make grid`): every quantization recipe of the default model, measured the same way.

From the base file (Gemma 3 270M Q4_K_M, scripts/fetch-model.sh) it builds each variant with
`nibble quantize`, then measures, at windows of 512 and 2048 tokens on The Jargon File
(scripts/fetch-text.sh):
  - perplexity (`nibble perplexity`), and KL divergence to the base's saved distributions (--kld):
    mean, 99th percentile, same-top-token rate;
  - prefill and decode tokens/s (`nibble run`, a fixed 256-token prompt, 64 greedy tokens);
  - file MiB, bits per weight (`nibble inspect --json`), peak resident memory of the perplexity run.
It rewrites the part of docs/QUALITY.md between the grid markers and keeps the raw numbers in
models/grid/results.json. Variant files and the base's distributions are reused when present
(--fresh rebuilds them). Standard library only.

Usage: python3 bench/grid.py [--chunks-512 N] [--chunks-2048 N] [-t N] [--only NAME,...] [--fresh]
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRID = os.path.join(ROOT, "models", "grid")
DOC = os.path.join(ROOT, "docs", "QUALITY.md")
BEGIN, END = "<!-- grid:begin (bench/grid.py writes this part) -->", "<!-- grid:end -->"

# name, quantize arguments after RECIPE-position (None: the base file itself), what it is
VARIANTS = [
    ("base", None, "the downloaded Q4_K_M file (llama.cpp's mix: Q8_0 embeddings, Q5_0/Q4_K/Q6_K layers)"),
    ("q8_0", ["q8_0"], "every weight Q8_0"),
    ("q4_k_m", ["q4_k_m"], "llama.cpp's Q4_K_M rules, requantized from the base"),
    ("mxfp4-ref", ["mxfp4", "--mode", "ref"], "every weight MXFP4, llama.cpp's reference rounding"),
    ("mxfp4-best", ["mxfp4", "--mode", "best", "--imatrix", "{imatrix}"],
     "every weight MXFP4, error-lowering search weighted by the calibration imatrix"),
    ("nvfp4-ref", ["nvfp4", "--mode", "ref"], "every weight NVFP4, reference rounding"),
    ("nvfp4-best", ["nvfp4", "--mode", "best", "--imatrix", "{imatrix}"],
     "every weight NVFP4, error-lowering search weighted by the calibration imatrix"),
    ("nvfp4-2l", ["nvfp4_2l"], "every weight two-level NVFP4 (per-tensor .scale)"),
    ("mxfp4_m", ["mxfp4_m"], "MXFP4 with sensitive tensors at Q6_K"),
    ("nvfp4_m", ["nvfp4_m"], "NVFP4 with sensitive tensors at Q6_K"),
    ("auto-base", ["auto:{base_bpw}"], "auto recipe at the base's bits per weight"),
    ("auto-4.5", ["auto:4.5"], "auto recipe at 4.5 bits per weight"),
]


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def sh(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def fetch(script):
    r = sh(["bash", os.path.join(ROOT, "scripts", script)], check=True)
    return os.path.join(ROOT, r.stdout.strip().splitlines()[-1])


def bits_per_weight(nibble, path):
    r = sh([nibble, "inspect", "--json", path], check=True)
    return json.loads(r.stdout)["total"]["bits_per_weight"]


def perplexity(nibble, model, args, threads):
    r = sh([nibble, "perplexity", "-m", model, "-t", str(threads), "--json"] + args)
    if r.returncode != 0:
        raise RuntimeError("perplexity failed: " + r.stderr[-1500:])
    return json.loads(r.stdout)


def speeds(nibble, paths, prompt, threads, runs):
    """Prefill and decode tokens/s of every variant: `runs` rounds, each running every variant once
    in turn, so that the load of other work on the machine falls on all of them alike; the median
    of the rounds counts (min and max kept). One unmeasured run of every file comes first: a file
    just written by `nibble quantize` sits in the page cache in 4 KiB pages, which cost the same
    bytes up to 25 % of decode speed at 2 threads here, and nibble's first load of it has it read
    again in 2 MiB pages (NB_GGUF_RESIDENT, src/gguf/reader.c)."""
    for path in paths.values():
        sh([nibble, "run", "-m", path, "-p", "warm up", "-n", "1", "-t", str(threads), "-c", "256"])
    got = {name: {"prefill": [], "decode": []} for name in paths}
    for _ in range(runs):
        for name, path in paths.items():
            r = sh([nibble, "run", "-m", path, "-f", prompt, "-n", "64", "--temp", "0", "-t", str(threads), "-c", "1024"])
            if r.returncode != 0:
                raise RuntimeError(f"run {name} failed: " + r.stderr[-1500:])
            pre = re.search(r"prompt:\s+(\d+) tokens\s+([\d.]+) tokens/s", r.stderr)
            gen = re.search(r"generation:\s+(\d+) tokens\s+([\d.]+) tokens/s", r.stderr)
            got[name]["prefill"].append(float(pre.group(2)))
            got[name]["decode"].append(float(gen.group(2)))
            got[name]["tokens"] = (int(pre.group(1)), int(gen.group(1)))
    out = {}
    for name, g in got.items():
        out[name] = {"prefill_tokens": g["tokens"][0], "decode_tokens": g["tokens"][1], "runs": runs,
                     "prefill_tps": statistics.median(g["prefill"]), "decode_tps": statistics.median(g["decode"]),
                     "decode_min": min(g["decode"]), "decode_max": max(g["decode"])}
    return out


def write_prompt(text, path):
    # about 256 tokens of the text (the Jargon File runs near 3.3 bytes a token)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text[100_000:100_850])


# The imatrix of the `best` variants comes from the text's last CALIB_CHARS characters, which the
# evaluation windows (the first few thousand tokens) and the speed prompt never reach.
CALIB_CHARS, CALIB_CHUNKS = 300_000, 40


def build_imatrix(nibble, base, text, threads, fresh):
    out, calib = os.path.join(GRID, "imatrix.gguf"), os.path.join(GRID, "calib.txt")
    if os.path.exists(out) and not fresh:
        return out
    with open(calib, "w", encoding="utf-8") as f:
        f.write(text[-CALIB_CHARS:])
    r = sh([nibble, "imatrix", "-m", base, "-f", calib, "-o", out, "--chunks", str(CALIB_CHUNKS), "--process-output",
            "-t", str(threads)])
    if r.returncode != 0:
        raise RuntimeError("imatrix failed: " + (r.stderr or r.stdout)[-1500:])
    return out


def build_variant(nibble, base, name, qargs, base_bpw, imatrix, threads, fresh):
    out = os.path.join(GRID, name + ".gguf")
    if qargs is None:
        return base, None
    if os.path.exists(out) and not fresh:
        return out, None
    args = [a.format(base_bpw=f"{base_bpw:.2f}", imatrix=imatrix) for a in qargs]
    t0 = time.time()
    r = sh([nibble, "quantize", base, out, args[0]] + args[1:] + ["-t", str(threads)])
    if r.returncode != 0:
        raise RuntimeError(f"quantize {' '.join(args)} failed: " + (r.stderr or r.stdout)[-1500:])
    return out, time.time() - t0


def fmt(v, spec, missing="—"):
    return missing if v is None else format(v, spec)


def table(results, ctxs):
    base = next((r for r in results if r["name"] == "base" and "error" not in r), None)
    lines = []
    head = ["variant", "MiB", "bits/w"]
    for c in ctxs:
        head += [f"PPL @{c}", f"KLD mean @{c}", f"KLD 99% @{c}", f"same top @{c}"]
    head += ["prefill t/s", "decode t/s", "decode vs base", "peak MiB @512", "peak MiB @2048"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for r in results:
        if "error" in r:
            lines.append(f"| {r['name']} | " + " | ".join(["—"] * (len(head) - 2)) + f" | failed: {r['error'][:80]} |")
            continue
        row = [r["name"], fmt(r["mib"], ".1f"), fmt(r["bpw"], ".3f")]
        for c in ctxs:
            p = r["ppl"].get(str(c))
            if not p:
                row += ["—"] * 4
                continue
            row.append(f"{p['ppl']:.3f} ± {p['ppl_err']:.3f}")
            if r["name"] == "base":
                row += ["0 (reference)", "0", "100 %"]
            else:
                row += [f"{p['kld']:.5f} ± {p['kld_err']:.5f}", f"{p['kld_p99']:.4f}", f"{100 * p['same_top']:.2f} %"]
        s = r.get("speed") or {}
        row += [fmt(s.get("prefill_tps"), ".1f"), fmt(s.get("decode_tps"), ".1f")]
        row.append(f"{s['decode_tps'] / base['speed']['decode_tps']:.2f}x" if s and base and base.get("speed") else "—")
        for c in ("512", "2048"):
            p = r["ppl"].get(c)
            row.append(fmt(p and p.get("peak_rss_mib"), ".0f"))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def targets(results, ctxs):
    by = {r["name"]: r for r in results if "error" not in r}
    out = []
    for fam in ("mxfp4", "nvfp4"):
        ref, best = by.get(fam + "-ref"), by.get(fam + "-best")
        for c in map(str, ctxs):
            if not (ref and best and ref["ppl"].get(c) and best["ppl"].get(c)):
                out.append(f"- {fam.upper()} best vs ref at window {c}: not measured (a variant is missing).")
                continue
            a, b = ref["ppl"][c]["kld"], best["ppl"][c]["kld"]
            cut = 1 - b / a
            same = abs(ref["mib"] - best["mib"]) < 1e-6
            out.append(f"- {fam.upper()} `best` vs `ref` at window {c}: mean KLD {a:.5f} → {b:.5f}, "
                       f"{100 * cut:+.1f} % lower ({'met' if cut >= 0.10 else 'NOT met'}: target ≥ 10 %); "
                       f"sizes {ref['mib']:.2f} and {best['mib']:.2f} MiB ({'identical' if same else 'DIFFERENT'}).")
    base = by.get("base")
    for name in ("mxfp4-best", "nvfp4-best", "mxfp4-ref", "nvfp4-ref"):
        v = by.get(name)
        if base and v and base.get("speed") and v.get("speed"):
            x = v["speed"]["decode_tps"] / base["speed"]["decode_tps"]
            out.append(f"- all-FP4 `{name}` ({v['bpw']:.2f} bits/w vs {base['bpw']:.2f}) decodes at "
                       f"{x:.2f}x the base ({'met' if x >= 1.5 else 'NOT met'}: target ≥ 1.5x).")
            break
    return "\n".join(out)


def reused(meta):
    m = meta.get("measured_ppl")
    if not m:
        return ""
    return (f" Perplexity and KLD columns reused (--reuse) from `{m['command']}` of {m['date']} at `{m['commit']}` "
            f"({m['minutes']:.1f} minutes, load average {m['load']}).")


def write_doc(results, meta, ctxs):
    body = [BEGIN, "",
            f"Measured {meta['date']} at commit `{meta['commit']}` on {meta['machine']}, {meta['threads']} threads; "
            f"load average at the start {meta['load']} (other work shared the cores, so speeds are indicative). "
            f"Text: {meta['text']}; windows: {meta['chunks']}; speeds: median of {meta['speed_runs']} rounds, every variant once a round. "
            f"Command: `{meta['command']}` ({meta['minutes']:.1f} minutes)." + reused(meta), "",
            table(results, ctxs), "", "Targets:", "", targets(results, ctxs), "", END]
    text = open(DOC, encoding="utf-8").read() if os.path.exists(DOC) else ""
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + "\n".join(body) + text[text.index(END) + len(END):]
    else:
        text += "\n## Results\n\n" + "\n".join(body) + "\n"
    tmp = DOC + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, DOC)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks-512", type=int, default=6)
    ap.add_argument("--chunks-2048", type=int, default=1)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--only", default="", help="comma-separated variant names (the base always runs)")
    ap.add_argument("--fresh", action="store_true", help="rebuild variant files and the base distributions")
    ap.add_argument("--speed-runs", type=int, default=5, help="rounds of speed runs (every variant once a round); the median counts")
    ap.add_argument("--reuse", action="store_true",
                    help="take perplexity/KLD numbers from models/grid/results.json where the variant and windows "
                         "match (re-measure speed only); stale after engine changes")
    a = ap.parse_args()
    t_start, load = time.time(), "%.2f" % os.getloadavg()[0]
    nibble = os.path.join(os.environ.get("NB_BUILD", os.path.join(ROOT, "build")), "nibble")
    base = fetch("fetch-model.sh")
    text_path = fetch("fetch-text.sh")
    os.makedirs(GRID, exist_ok=True)
    prompt = os.path.join(GRID, "prompt.txt")
    text = open(text_path, encoding="utf-8").read()
    write_prompt(text, prompt)
    imatrix = build_imatrix(nibble, base, text, a.threads, a.fresh)
    chunks = {512: a.chunks_512, 2048: a.chunks_2048}
    ctxs = [c for c in (512, 2048) if chunks[c] > 0]
    base_bpw = bits_per_weight(nibble, base)
    only = set(filter(None, a.only.split(",")))
    old, old_meta = {}, None
    if a.reuse and os.path.exists(os.path.join(GRID, "results.json")):
        prev = json.load(open(os.path.join(GRID, "results.json")))
        old = {r["name"]: r for r in prev["results"] if "error" not in r}
        old_meta = prev["meta"].get("measured_ppl", prev["meta"])
    results, paths = [], {}
    for name, qargs, what in VARIANTS:
        if only and name != "base" and name not in only:
            continue
        r = {"name": name, "what": what, "ppl": {}}
        results.append(r)
        try:
            path, qsec = build_variant(nibble, base, name, qargs, base_bpw, imatrix, a.threads, a.fresh)
            r["quantize_s"] = qsec
            r["mib"] = os.path.getsize(path) / 1048576
            r["bpw"] = bits_per_weight(nibble, path)
            for c in ctxs:
                prev = old.get(name, {}).get("ppl", {}).get(str(c))
                if prev and prev["windows"] == chunks[c] and qsec is None:
                    r["ppl"][str(c)] = prev
                    continue
                saved = os.path.join(GRID, f"base-c{c}-n{chunks[c]}.lp")
                if name == "base":
                    if a.fresh or not os.path.exists(saved):
                        args = ["-f", text_path, "-c", str(c), "--chunks", str(chunks[c]), "--save-logits", saved]
                    else:  # the saved distributions are the base's: score them against themselves
                        args = ["--kld", saved]
                else:
                    args = ["--kld", saved]
                r["ppl"][str(c)] = perplexity(nibble, path, args, a.threads)
                print(f"{name} @{c}: PPL {r['ppl'][str(c)]['ppl']:.4f}"
                      + (f", KLD {r['ppl'][str(c)]['kld']:.5f}" if "kld" in r["ppl"][str(c)] else ""), flush=True)
            paths[name] = path
            print(f"{name}: {r['mib']:.1f} MiB, {r['bpw']:.3f} bits/w", flush=True)
        except Exception as e:  # one failed variant does not stop the grid
            r["error"] = str(e).strip().splitlines()[-1] if str(e).strip() else repr(e)
            print(f"{name}: FAILED: {e}", file=sys.stderr, flush=True)
    by_speed = speeds(nibble, paths, prompt, a.threads, a.speed_runs)
    for r in results:
        if r["name"] in by_speed:
            r["speed"] = by_speed[r["name"]]
    commit = sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).stdout.strip() or "unknown"
    if sh(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]).stdout.strip():
        commit += " + uncommitted changes"
    meta = {"date": datetime.date.today().isoformat(), "commit": commit,
            "machine": f"{cpu_name()}, {os.cpu_count()} CPUs",
            "threads": a.threads, "load": load, "minutes": (time.time() - t_start) / 60,
            "text": "The Jargon File 4.4.7 (Debian jargon-text)",
            "chunks": ", ".join(f"{chunks[c]} × {c} tokens ({chunks[c] * (c - 1 - c // 2)} scored positions)"
                                for c in ctxs),
            "speed_runs": a.speed_runs, "command": "make grid" + (f" GRID_ARGS='{' '.join(sys.argv[1:])}'" if sys.argv[1:] else "")}
    if old_meta:  # say where reused numbers come from, and keep that through later reuses
        meta["measured_ppl"] = {k: old_meta[k] for k in ("date", "commit", "load", "minutes", "command")}
    with open(os.path.join(GRID, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    write_doc(results, meta, ctxs)
    print(table(results, ctxs))
    print(targets(results, ctxs))
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
