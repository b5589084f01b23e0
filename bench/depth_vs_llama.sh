#!/bin/bash
# nibble bench beside llama-bench at depth 16384 on one model: f16 cells with flash attention off and
# on at 1 and 2 threads, q8_0 cells (flash attention on: llama.cpp needs it for quantized V) at 1 and 2
# threads, and q4_0 decode at 2; each nibble line followed by the same llama-bench line, so that the
# host's load falls on both alike. docs/BENCHMARKS.md ("Long context") records its output.
#   usage: bench/depth_vs_llama.sh [MODEL] [LLAMA_BENCH]   (about 70 minutes on 2 first-generation Zen cores)
set -u
cd "$(dirname "$0")/.."
M=${1:-models/gemma-3-270m-q4_k_m.gguf}
L=${2:-build/llama-tools/bin/llama-bench}
date -u; build/nibble version; git log --oneline -1
pair() {
    for exe in build/nibble "$L"; do
        echo "== $exe $*"
        if [ "$exe" = build/nibble ]; then build/nibble bench "$@"; else "$L" "$@"; fi 2>&1 | grep -E '^\|'
        date -u
    done
}
D="-m $M -n 128 -d 16384 -r 1"
pair $D -p 512 -fa 0,1 -t 1,2
pair $D -p 512 -fa 1 -ctk q8_0 -ctv q8_0 -t 1,2
pair $D -p 0 -fa 1 -ctk q4_0 -ctv q4_0 -t 2
