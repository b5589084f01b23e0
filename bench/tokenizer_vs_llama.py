"""Tokenizer throughput: nibble against llama.cpp (llama-cpp-python) on the same text and vocabulary.

Both are called in-process from Python (nibble through ctypes on build/libnibble.so, llama.cpp
through Llama(vocab_only=True).tokenize), one thread, alternating runs; each returns a Python list,
so both carry the same conversion cost. Prints MB/s (median, min..max) per vocabulary and whether
the ids are identical. Not part of make test. Usage:
  build/venv/bin/python bench/tokenizer_vs_llama.py [-f TEXT] [-r 5] [VOCAB ...]
  build/venv/bin/python bench/tokenizer_vs_llama.py --unicode
--unicode instead counts the code points where PCRE2's Unicode properties (what nibble's
pre-tokenizers see) differ from llama.cpp's tables (src/unicode-data.cpp) for \p{L} \p{N} \p{P}
\p{M} \p{S}, and lists the first few.
VOCAB: a name of llama.cpp's models/ggml-vocab-NAME.gguf (default: llama-bpe qwen2 gpt-2 llama-spm)
or a path to a GGUF.
"""
import argparse
import ctypes
import os
import re
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
from test_tokenizer import Nibble, Reference  # noqa: E402
from test_tokenizer_bpe import llama_tree  # noqa: E402


def timed(fn, text):
    t0 = time.perf_counter()
    ids = fn(text, False, False)
    return time.perf_counter() - t0, ids


FLAGS = {"L": 0x4, "N": 0x2, "P": 0x20, "M": 0x10, "S": 0x40}  # llama.cpp's unicode_cpt_flags bits


def unicode_compare(tree):
    """Code points (0 .. U+10FFFF) per category where PCRE2 and llama.cpp's tables disagree."""
    src = open(os.path.join(tree, "src", "unicode-data.cpp")).read()
    body = src[src.index("unicode_ranges_flags"):]
    body = body[:body.index("};")]
    ranges = [(int(a, 16), int(b, 16)) for a, b in re.findall(r"\{0x([0-9A-Fa-f]+), 0x([0-9A-Fa-f]+)\}", body)]
    N = 0x110000
    flags = bytearray(N)  # low byte of the flags is enough for these bits
    for (start, f), (end, _) in zip(ranges, ranges[1:] + [(N, 0)]):
        flags[start:min(end, N)] = bytes([f & 0xFF]) * (min(end, N) - start)
    pc = ctypes.CDLL("libpcre2-32.so.0")
    pc.pcre2_compile_32.restype = ctypes.c_void_p
    pc.pcre2_compile_32.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.POINTER(ctypes.c_int),
                                    ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p]
    pc.pcre2_match_data_create_32.restype = ctypes.c_void_p
    pc.pcre2_match_data_create_32.argtypes = [ctypes.c_uint32, ctypes.c_void_p]
    pc.pcre2_match_32.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_uint32,
                                  ctypes.c_void_p, ctypes.c_void_p]
    pc.pcre2_get_ovector_pointer_32.restype = ctypes.POINTER(ctypes.c_size_t)
    pc.pcre2_get_ovector_pointer_32.argtypes = [ctypes.c_void_p]
    subject = (ctypes.c_uint32 * N)(*range(N))
    md = pc.pcre2_match_data_create_32(1, None)
    ver = (ctypes.c_uint32 * 32)()
    pc.pcre2_config_32(10, ver)  # PCRE2_CONFIG_UNICODE_VERSION
    print("PCRE2 Unicode %s; llama.cpp tables from src/unicode-data.cpp" % "".join(chr(c) for c in ver if c))
    total = 0
    for cat, bit in FLAGS.items():
        pat = ("\\p{%s}+" % cat).encode()
        wide = (ctypes.c_uint32 * (len(pat) + 1))(*pat, 0)
        err, off = ctypes.c_int(), ctypes.c_size_t()
        re_ = pc.pcre2_compile_32(wide, len(pat), 0x00020000, ctypes.byref(err), ctypes.byref(off), None)  # PCRE2_UCP
        mine = bytearray(N)
        at = 0
        while pc.pcre2_match_32(re_, subject, N, at, 0, md, None) >= 0:
            ov = pc.pcre2_get_ovector_pointer_32(md)
            mine[ov[0]:ov[1]] = b"\1" * (ov[1] - ov[0])
            at = ov[1]
        diff = [c for c in range(N) if (0xD800 > c or c > 0xDFFF) and bool(flags[c] & bit) != bool(mine[c])]
        total += len(diff)
        only_llama = sum(1 for c in diff if flags[c] & bit)
        print("\\p{%s}: %d code points differ (%d in llama.cpp's category only)%s" % (cat, len(diff), only_llama, (", e.g. " + " ".join(
            "U+%04X(%s)" % (c, "llama.cpp" if flags[c] & bit else "PCRE2") for c in diff[:6])) if diff else ""))
    print("total %d (a code point can count in two categories; surrogates excluded)" % total)


def main():
    if "--unicode" in sys.argv:
        return unicode_compare(llama_tree())
    ap = argparse.ArgumentParser()
    ap.add_argument("-f", default=os.path.join(ROOT, "models", "jargon-4.4.7.txt"))
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("-b", type=int, default=1 << 20, help="bytes of the text to use (default 1 MiB)")
    ap.add_argument("vocabs", nargs="*", default=["llama-bpe", "qwen2", "gpt-2", "llama-spm"])
    a = ap.parse_args()
    text = open(a.f, "rb").read()[:a.b]
    tree = llama_tree()
    lib = os.path.join(ROOT, os.environ.get("NB_BUILD", "build"), "libnibble.so")
    print("text: %s, %d bytes; %d runs each, alternating" % (os.path.basename(a.f), len(text), a.r))
    print("| vocabulary | tokens | nibble MB/s | llama.cpp MB/s | ratio | same ids |")
    print("|---|---:|---:|---:|---:|---|")
    for v in a.vocabs:
        path = v if os.path.exists(v) else os.path.join(tree, "models", "ggml-vocab-%s.gguf" % v)
        nb, ref = Nibble(lib, path), Reference(path)
        tn, tr = [], []
        for _ in range(a.r):
            t, ids_n = timed(nb.tokenize, text)
            tn.append(t)
            t, ids_r = timed(ref.tokenize, text)
            tr.append(t)
        mb = len(text) / 1e6
        mn, mr = mb / statistics.median(tn), mb / statistics.median(tr)
        print("| %s | %d | %.2f (%.2f..%.2f) | %.2f (%.2f..%.2f) | %.2f | %s |"
              % (os.path.basename(path), len(ids_r), mn, mb / max(tn), mb / min(tn), mr, mb / max(tr), mb / min(tr),
                 mn / mr, "yes" if ids_n == ids_r else "NO"))


if __name__ == "__main__":
    main()
