#!/usr/bin/env python3
"""Load on `nibble serve` and llama.cpp's llama-server, side by side: aggregate generated tokens/s
and time to first token (p50, p99) at 1, 2, 4 and 8 concurrent streams. Both servers get the same
model, threads, slots and context per slot, on loopback; every request streams a completion of
--tokens tokens (ignore_eos) from its own prompt. Bounded: --rounds requests per stream per level,
--limit seconds per request. Prints a Markdown table (docs/BENCHMARKS.md records it), plus
`nibble run`'s single-stream decode for reference.

  usage: build/venv/bin/python bench/serve_load.py [-m MODEL] [-t 2] [-np 8] [--streams 1,2,4,8]
         [--tokens 64] [--rounds 3] [--nibble-args FLAGS] [--llama-server PATH | --no-llama]
  llama-server: scripts/build-llama-tools.sh builds it (build/llama-tools/bin/llama-server).
Standard library only. Run it on a quiet machine: the numbers are wall-clock.
"""
import argparse
import http.client
import json
import os
import re
import select
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

WORDS = ("robot workshop paint river mountain library garden engine winter harbour violin desert lantern "
         "orchard comet bakery forest tunnel").split()


def prompt_of(i):
    return f"Story {i}: the {WORDS[i % len(WORDS)]} and the {WORDS[(7 * i + 3) % len(WORDS)]} met one morning, and"


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_health(port, limit=300):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def start_nibble(a):
    p = subprocess.Popen([a.nibble, "serve", "-m", a.model, "--port", "0", "-t", str(a.threads), "-np",
                          str(a.slots), "-c", str(a.ctx)] + a.nibble_args.split(), stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    ready, _, _ = select.select([p.stdout], [], [], 300)
    line = p.stdout.readline() if ready else ""
    m = re.search(r"127\.0\.0\.1:(\d+)/", line)
    if not m:
        p.kill()
        sys.exit(f"serve_load: nibble serve did not start: {line!r}")
    return p, int(m.group(1))


def start_llama(a):
    port = free_port()
    # llama-server's -c is the whole cache, shared by its -np slots
    p = subprocess.Popen([a.llama_server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port), "-t",
                          str(a.threads), "-tb", str(a.threads), "-np", str(a.slots), "-c", str(a.ctx * a.slots),
                          "--no-webui"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not wait_health(port):
        p.kill()
        sys.exit("serve_load: llama-server did not become healthy")
    return p, port


def one_request(port, i, a, out):
    """Streams one completion; appends (ttft, tokens, seconds) to out."""
    body = json.dumps({"prompt": prompt_of(i), "max_tokens": a.tokens, "temperature": 0, "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=a.limit)
    t0 = time.monotonic()
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    ttft, tokens, chunks = None, None, 0
    for raw in r:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ev.get("usage"):
            tokens = ev["usage"]["completion_tokens"]
        for ch in ev.get("choices") or []:
            if ch.get("text"):
                chunks += 1
                if ttft is None:
                    ttft = time.monotonic() - t0
    c.close()
    out.append((ttft if ttft is not None else float("nan"), tokens if tokens is not None else chunks,
                time.monotonic() - t0))


def level(port, n, a, base):
    """n streams, each sending a.rounds requests back to back: (tokens/s, ttft p50, p99, the median
    request's decode rate after its first token)."""
    results = []
    lock = threading.Lock()

    def stream(k):
        mine = []
        for r in range(a.rounds):
            one_request(port, base + k * a.rounds + r, a, mine)
        with lock:
            results.extend(mine)

    t0 = time.monotonic()
    threads = [threading.Thread(target=stream, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    ttfts = sorted(x[0] for x in results)
    p99 = ttfts[min(len(ttfts) - 1, int(round(0.99 * (len(ttfts) - 1))))]
    after_first = statistics.median((x[1] - 1) / (x[2] - x[0]) for x in results)
    return sum(x[1] for x in results) / wall, statistics.median(ttfts), p99, after_first


def run_decode(a):
    """`nibble run`'s single-stream decode, tokens/s (from its statistics)."""
    err = subprocess.run([a.nibble, "run", "-m", a.model, "-p", prompt_of(0), "-n", str(a.tokens), "--ignore-eos",
                          "--temp", "0", "-t", str(a.threads), "-c", str(a.ctx)], capture_output=True, text=True,
                         timeout=600).stderr
    m = re.search(r"generation:\s+\d+ tokens\s+([\d.]+) tokens/s", err)
    return float(m.group(1)) if m else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", default="models/gemma-3-270m-q4_k_m.gguf")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-np", "--slots", type=int, default=8)
    ap.add_argument("-c", "--ctx", type=int, default=1024, help="context per slot")
    ap.add_argument("--streams", default="1,2,4,8")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=float, default=600, help="seconds one request may take")
    ap.add_argument("--nibble", default=os.path.join(os.environ.get("NB_BUILD", "build"), "nibble"))
    ap.add_argument("--nibble-args", default="", help="more flags for nibble serve (e.g. --no-fast-batch)")
    ap.add_argument("--llama-server", default="build/llama-tools/bin/llama-server")
    ap.add_argument("--no-llama", action="store_true")
    a = ap.parse_args()
    streams = [int(x) for x in a.streams.split(",")]
    if max(streams) > a.slots:
        sys.exit(f"serve_load: {max(streams)} streams need -np {max(streams)} slots")
    servers = [("nibble serve", start_nibble)]
    if not a.no_llama:
        if not os.access(a.llama_server, os.X_OK):
            sys.exit(f"serve_load: no {a.llama_server} (scripts/build-llama-tools.sh builds it; or --no-llama)")
        servers.append(("llama-server", start_llama))
    rows = {}
    for name, start in servers:
        p, port = start(a)
        try:
            one_request(port, 10_000, a, [])  # warm: page in the weights
            for n in streams:
                rows[(name, n)] = level(port, n, a, 1000 * n)
                print(f"  {name}, {n} stream(s): {rows[(name, n)][0]:.1f} tokens/s", file=sys.stderr)
        finally:
            p.terminate()
            p.wait(60)
    decode = run_decode(a)
    print(f"\nModel {os.path.basename(a.model)}, {a.threads} threads, {a.slots} slots of {a.ctx}, "
          f"{a.tokens} tokens per request, {a.rounds} requests per stream; `nibble run` decode: {decode:.1f} tokens/s\n")
    head = "| streams | " + " | ".join(f"{name} tok/s | {name} TTFT p50 ms | {name} TTFT p99 ms" for name, _ in servers)
    print(head + " |")
    print("|---:|" + "---:|" * (3 * len(servers)))
    for n in streams:
        cells = []
        for name, _ in servers:
            tps, p50, p99, _ = rows[(name, n)]
            cells += [f"{tps:.1f}", f"{1e3 * p50:.0f}", f"{1e3 * p99:.0f}"]
        print(f"| {n} | " + " | ".join(cells) + " |")
    if 1 in streams:
        after_first = rows[("nibble serve", 1)][3]
        print(f"\nOne stream: nibble serve decodes {after_first:.1f} tokens/s after a request's first token "
              f"(median request), {after_first / decode:.2f}x `nibble run`'s decode.")
    if len(servers) == 2:
        n = max(streams)
        print(f"\nAt {n} streams: nibble {rows[('nibble serve', n)][0] / decode:.2f}x its single-stream decode, "
              f"{rows[('nibble serve', n)][0] / rows[('llama-server', n)][0]:.2f}x llama-server.")


if __name__ == "__main__":
    main()
