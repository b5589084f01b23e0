#!/usr/bin/env python3
"""Side-by-side speed of `nibble quantize` and llama.cpp's quantize (llama-cpp-python's
llama_model_quantize) on the same input, recipe and thread count: runs alternate (nibble, llama,
nibble, ...) so that both see the same machine state; prints each time, the medians, and whether
the two outputs are byte-identical.

usage: build/venv/bin/python bench/quantize_vs_llama.py IN.gguf [RECIPE=q4_k_m] [THREADS=2] [RUNS=5]
"""
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

import llama_cpp

FTYPES = {'q8_0': 7, 'q4_0': 2, 'q4_k_m': 15}


def main():
    src = sys.argv[1]
    recipe = sys.argv[2] if len(sys.argv) > 2 else 'q4_k_m'
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    nibble = os.path.join(os.environ.get('NB_BUILD', 'build'), 'nibble')
    quiet = llama_cpp.llama_log_callback(lambda *a: None)
    llama_cpp.llama_log_set(quiet, ctypes.c_void_p())
    out_dir = os.path.dirname(os.path.abspath(src))
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        nb_out, ll_out = os.path.join(tmp, 'nb.gguf'), os.path.join(tmp, 'll.gguf')
        t_nb, t_ll = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run([nibble, 'quantize', src, nb_out, recipe, '-t', str(threads)], check=True,
                           stdout=subprocess.DEVNULL)
            t_nb.append(time.perf_counter() - t0)
            p = llama_cpp.llama_model_quantize_default_params()
            p.ftype, p.nthread, p.allow_requantize = FTYPES[recipe], threads, True
            t0 = time.perf_counter()
            rc = llama_cpp.llama_model_quantize(src.encode(), ll_out.encode(), ctypes.byref(p))
            t_ll.append(time.perf_counter() - t0)
            assert rc == 0, 'llama.cpp quantize failed'
        same = open(nb_out, 'rb').read() == open(ll_out, 'rb').read()
    print('input %s, recipe %s, %d threads, %d alternating runs' % (src, recipe, threads, runs))
    print('nibble    s: %s  median %.2f' % (' '.join('%.2f' % t for t in t_nb), statistics.median(t_nb)))
    print('llama.cpp s: %s  median %.2f' % (' '.join('%.2f' % t for t in t_ll), statistics.median(t_ll)))
    print('outputs byte-identical: %s' % same)


if __name__ == '__main__':
    main()
