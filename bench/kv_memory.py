#!/usr/bin/env python3
"""Peak resident memory of a long context, nibble beside llama.cpp: `nibble serve` and llama.cpp's
llama-server with one slot of -c CTX (default 32768), each cell type (-ctk/-ctv), both at their
default cache (llama-server: window-sized sliding-window layers, --swa-full off; flash attention
on where its quantized V cells need it). Each server gets one completion of a prompt of about
--prompt-tokens tokens (so the cache is written, not only reserved) and 4 generated tokens; then
its VmHWM and VmRSS (/proc/PID/status) and the prompt's wall time are read. Prints a Markdown
table (docs/BENCHMARKS.md records it). Memory does not depend on the machine's load; the times do.

  usage: build/venv/bin/python bench/kv_memory.py [-m MODEL] [-c 32768] [--prompt-tokens 16000]
         [--cells f16,q8_0,q4_0] [-t 2] [--llama-server PATH]
Standard library only.
"""
import argparse
import json
import os
import select
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_load import WORDS, free_port, wait_health  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def start(cmd, nibble):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE if nibble else subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         text=True)
    if nibble:  # it prints its port when it listens
        ready, _, _ = select.select([p.stdout], [], [], 300)
        line = p.stdout.readline() if ready else ""
        port = int(line.split("http://")[1].split("/")[0].rsplit(":", 1)[1]) if "http://" in line else None
    else:
        port = int(cmd[cmd.index("--port") + 1])
    if port is None or not wait_health(port):
        p.kill()
        raise RuntimeError(f"{cmd[0]} did not start")
    return p, port


def server_cmd(engine, exe, model, ctx, threads, cells, llama_fa=None):
    """The command line of one slot of -c ctx: `nibble serve` on a free port it prints, or llama-server
    on a free port chosen here, with flash attention on where its quantized V cells need it, else
    llama_fa (None: llama-server's default)."""
    common = ["-m", model, "-c", str(ctx), "-np", "1", "-t", str(threads), "-ctk", cells, "-ctv", cells]
    if engine == "nibble":
        return [exe, "serve", "--port", "0"] + common
    fa = "on" if cells != "f16" else llama_fa
    return [exe, "--port", str(free_port())] + common + (["-fa", fa] if fa else [])


def complete(port, prompt):
    body = json.dumps({"prompt": prompt, "max_tokens": 4, "temperature": 0}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=3600) as r:
        usage = json.loads(r.read())["usage"]
    return time.monotonic() - t0, usage["prompt_tokens"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("-c", "--ctx", type=int, default=32768)
    ap.add_argument("--prompt-tokens", type=int, default=16000)
    ap.add_argument("--cells", default="f16,q8_0,q4_0")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--nibble", default=os.path.join(ROOT, "build", "nibble"))
    ap.add_argument("--llama-server", default=os.path.join(ROOT, "build", "llama-tools", "bin", "llama-server"))
    a = ap.parse_args()
    prompt = " ".join(WORDS[(i * 7) % len(WORDS)] for i in range(a.prompt_tokens))  # about a token a word
    print(f"model {os.path.basename(a.model)}, -c {a.ctx}, 1 slot, {a.threads} threads\n")
    print("| engine | cells | prompt tokens | prompt s | peak RSS MiB | RSS after MiB |")
    print("|---|---|---|---|---|---|")
    for cells in a.cells.split(","):
        for engine in ("nibble", "llama.cpp"):
            exe = a.nibble if engine == "nibble" else a.llama_server
            p, port = start(server_cmd(engine, exe, a.model, a.ctx, a.threads, cells), engine == "nibble")
            try:
                secs, n = complete(port, prompt)
                print(f"| {engine} | {cells} | {n} | {secs:.1f} | {status_kib(p.pid, 'VmHWM') / 1024:.0f} | "
                      f"{status_kib(p.pid, 'VmRSS') / 1024:.0f} |", flush=True)
            finally:
                p.terminate()
                p.wait(30)


if __name__ == "__main__":
    main()
