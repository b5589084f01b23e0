"""Tokenizer parity on llama.cpp's own vocabularies: byte-level BPE (llama3, qwen2, gpt-2, ...) and SPM.

For each vocabulary GGUF of llama.cpp's models/ (scripts/fetch-llama-src.sh unpacks them):
  * every .inp/.out pair (llama.cpp's tests/test-tokenizer-0: the .inp texts split at
    "\\n__ggml_vocab_test__\\n", one line of ids per text, add_special and parse_special off) must
    give the same ids;
  * a few hundred texts generated with a fixed seed (prose, code, CJK, Arabic, Devanagari, emoji and
    ZWJ sequences, digit runs, contractions, whitespace runs, invalid UTF-8, the vocabulary's own
    special-token texts) must give llama.cpp's ids for add_special/parse_special (1,0) (1,1) (0,0);
    nibble's detokenize must equal llama_detokenize for the four (remove_special, unparse_special)
    settings, and give the text back wherever llama.cpp's does;
  * every token's piece, with special on and off, must equal llama_token_to_piece's.
Each of those is one counted test per vocabulary; the last line is "N passed, N failed".
  usage: test_tokenizer_bpe.py [VOCAB ...]     (names as in ggml-vocab-NAME.gguf; default: all below)
"""
import ctypes
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from nbctypes import ROOT  # noqa: E402
from tally import Tally  # noqa: E402
from test_tokenizer import Nibble, Reference  # noqa: E402

# the families that matter first, then every other vocabulary nibble supports
VOCABS = ["llama-bpe", "qwen2", "gpt-2", "phi-3", "llama-spm", "qwen35", "starcoder", "refact", "command-r",
          "falcon", "mpt", "gpt-neox", "aquila", "deepseek-coder", "deepseek-llm", "baichuan"]
N_TEXTS = 240


def llama_tree():
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fetch-llama-src.sh")], check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout
    return os.path.join(ROOT, out.strip().splitlines()[-1])


def vector_pairs(path):
    """(text bytes, ids) of a .inp/.out pair, as test-tokenizer-0 reads them (a later equal text wins)."""
    raw = open(path + ".inp", "rb").read()
    outs = open(path + ".out", "rb").read().decode().split("\n")
    if outs and outs[-1] == "":
        outs.pop()
    inps, pos, sep = [], 0, b"\n__ggml_vocab_test__\n"
    while pos < len(raw):
        nxt = raw.find(sep, pos)
        inps.append(raw[pos:] if nxt < 0 else raw[pos:nxt])
        pos = len(raw) if nxt < 0 else nxt + len(sep)
    if len(inps) != len(outs):
        raise ValueError("%s: %d texts but %d id lines" % (path, len(inps), len(outs)))
    tests = {}
    for s, o in zip(inps, outs):
        tests[s] = [int(x) for x in o.split()]
    return list(tests.items())


def llama_decodable(b):
    """False when llama.cpp's UTF-8 decoder would produce a code point above U+10FFFF (it aborts)."""
    i = 0
    while i < len(b):
        c = b[i]
        n = 1 if c < 0x80 else 0 if c & 0x40 == 0 else 2 if c & 0x20 == 0 else 3 if c & 0x10 == 0 else \
            4 if c & 0x08 == 0 else 0
        if n <= 1 or i + n > len(b) or any(x & 0xC0 != 0x80 for x in b[i + 1:i + n]):
            i += 1
            continue
        if n == 4 and ((c & 7) << 18 | (b[i + 1] & 0x3F) << 12) > 0x10FFFF:
            return False
        i += n
    return True


WORDS = ("the of and to in is was for that with as on by at from it an be this which or are have not had but "
         "Hello World tokenizer Llama café naïve résumé Straße über MAXIMUM camelCase snake_case HTTPServer "
         "iPhone O'Neil e-mail state-of-the-art").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'D", "'x", "'"]
CODE = ["def f(x):\n    return x**2\n", "int main(void) {\n\treturn 0;\n}\n", "for (i = 0; i < n; ++i) a[i] += b[i];",
        "if x != None and y >= 3: print(f'{x!r}')", "<div class=\"a\">&nbsp;</div>", "SELECT * FROM t WHERE id=42;",
        "x = [1, 2, 3]  # comment", "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }", "$ ls -la | grep '^d'",
        "{\"k\": [true, null, 1.5e-3]}", "#include <stdio.h>", "a->b->c; p && q || !r", "~/.config/*.yml"]
SCRIPTS = ["今天天气很好，我们去公园散步吧。", "人工智能正在改变世界", "東京は日本の首都です。カタカナ", "한국어 문장을 토큰화합니다",
           "مرحبا بالعالم، كيف حالك؟", "نص عربي مع أرقام ١٢٣٤", "नमस्ते दुनिया। यह एक परीक्षण है।", "हिन्दी ०१२३",
           "Привет, мир! Съешь ещё", "Καλημέρα κόσμε", "สวัสดีครับ", "שלום עולם", "Ελληνικά ΑΒΓ",
           "e\u0301 a\u0308 n\u0303 Z\u0335\u0321a\u0336", "\ufb01ligature \u00bd \u2153 \u2460\u2461 \u00b2\u00b3"]
EMOJI = ["\U0001f999", "\U0001f600\U0001f600", "\u2764\ufe0f", "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466",
         "\U0001f3f3\ufe0f\u200d\U0001f308", "\U0001f469\U0001f3fd\u200d\U0001f4bb", "\U0001f1fa\U0001f1f8\U0001f1ef\U0001f1f5",
         "\U0001f44d\U0001f3ff", "\u2603", "\U0001d11e", "\U0001f9ec", "#\ufe0f\u20e3"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\n \n", " \t\n", "\u00a0", "\u3000", "\u2009",
          "\u200b", "\x0b\x0c", "    \n\n\t ", " " * 17, "\n" * 9, "\u2028", "\x85"]
BAD = [b"\xff", b"\xfe\xfe", b"\x80", b"\xbf\x80", b"\xc0\x80", b"\xc1\xbf", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98",
       b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xe0\x80\xaf", b"\xf8\x88\x80\x80\x80", b"\xc3(", b"\xe2(\xa1",
       b"\xf0(\x8c\xbc", b"\x00", b"\x1b[0m", b"\x7f"]


def gen_texts(specials, seed=1234):
    """N_TEXTS varied texts; specials are the vocabulary's own special-token texts."""
    rng = random.Random(seed)
    digits = lambda: "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 14)))  # noqa: E731
    makers = [
        lambda: rng.choice(WORDS) + rng.choice(CONTRACTIONS),
        lambda: " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8))),
        lambda: rng.choice(WORDS).upper() + rng.choice(CONTRACTIONS).upper(),
        lambda: rng.choice(CODE),
        lambda: rng.choice(SCRIPTS),
        lambda: rng.choice(EMOJI),
        lambda: digits(),
        lambda: digits() + "." + digits() + rng.choice([",", " ", "%", "e-5", ""]),
        lambda: rng.choice(SPACES),
        lambda: rng.choice(".,!?;:-()[]{}\"'`/\\|@#$%^&*_+=<>~"),
        lambda: rng.choice(BAD),
        lambda: rng.choice(specials) if specials else " ",
        lambda: rng.choice(specials)[:-1] if specials else "<",
    ]
    out = []
    while len(out) < N_TEXTS:
        parts = []
        for _ in range(rng.randint(1, 12)):
            p = rng.choice(makers)()
            parts.append(p if isinstance(p, bytes) else p.encode())
        t = b"".join(parts)
        if rng.random() < 0.2:
            t = rng.choice([b" ", b"  ", b"\n", b"\t"]) + t
        if rng.random() < 0.2:
            t += rng.choice([b" ", b"   ", b"\n", b"\n\n", b" \n"])
        if llama_decodable(t):
            out.append(t)
    # a few long ones: the short texts joined
    for k in range(10):
        out.append(b"".join(rng.sample(out, 30)))
    return out


def first_diff(a, b):
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return "at %d: nibble %s llama.cpp %s" % (k, a[k:k + 6], b[k:k + 6])


def check_vocab(T, tree, name, report):
    path = os.path.join(tree, "models", "ggml-vocab-%s.gguf" % name)
    try:
        nb = Nibble(os.path.join(ROOT, os.environ.get("NB_BUILD", "build"), "libnibble.so"), path)
        ref = Reference(path)
    except Exception as e:  # noqa: BLE001 - any set-up failure is one counted failure
        T.check(False, name + ": setup", str(e))
        return
    # test vectors
    if os.path.exists(path + ".inp"):
        pairs = vector_pairs(path)
        bad = [(s, first_diff(nb.tokenize(s, False, False), ids)) for s, ids in pairs
               if nb.tokenize(s, False, False) != ids]
        T.check(not bad, name + ": .inp/.out", "%d of %d differ, first %r %s" % (len(bad), len(pairs), *bad[0])
                if bad else "")
        vec = "%d/%d" % (len(pairs) - len(bad), len(pairs))
    else:
        vec = "-"
    # generated texts
    L = nb.L
    L.nb_tokenizer_type.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    specials = []
    for tid in range(nb.n_vocab):
        ty = L.nb_tokenizer_type(nb.t, tid)
        if ty in (2, 3, 4):
            specials.append(nb.piece(tid, True).decode(errors="replace"))
    specials = sorted(set(s for s in specials if s))[:200]
    texts = gen_texts(specials, seed=1234 + len(name))
    same, problems, t_nb, t_ref = 0, [], 0.0, 0.0
    for text in texts:
        ok = True
        for add_special, parse_special in ((True, False), (True, True), (False, False)):
            t0 = time.perf_counter()
            want = ref.tokenize(text, add_special, parse_special)
            t1 = time.perf_counter()
            got = nb.tokenize(text, add_special, parse_special)
            t_nb += time.perf_counter() - t1
            t_ref += t1 - t0
            if got != want:
                ok = False
                problems.append("%r add=%d parse=%d: %s" % (text[:50], add_special, parse_special, first_diff(got, want)))
        ids = ref.tokenize(text, True, True)
        for rs in (False, True):
            for us in (False, True):
                a, b = nb.detokenize(ids, rs, us), ref.detokenize(ids, rs, us)
                if a != b:
                    ok = False
                    problems.append("%r detokenize rs=%d us=%d: %r vs %r" % (text[:40], rs, us, a[:40], b[:40]))
        plain = ref.tokenize(text, False, False)
        if ref.detokenize(plain, False, True) == text and nb.detokenize(nb.tokenize(text, False, False), False, True) != text:
            ok = False
            problems.append("%r: round trip lost where llama.cpp's holds" % text[:50])
        same += ok
    T.check(not problems, name + ": %d texts" % len(texts), "; ".join(problems[:3]))
    # pieces
    bad = [(tid, sp) for tid in range(nb.n_vocab) for sp in (False, True) if nb.piece(tid, sp) != ref.piece(tid, sp)]
    T.check(not bad, name + ": pieces", "%d differ, first %s" % (len(bad), bad[:5]))
    report.append("%-15s vectors %-7s texts %d/%d identical (%.1f %%)  pieces %d/%d  tokenize %.0f ms vs llama.cpp %.0f ms"
                  % (name, vec, same, len(texts), 100.0 * same / len(texts), 2 * nb.n_vocab - len(bad), 2 * nb.n_vocab,
                     t_nb * 1e3, t_ref * 1e3))


def main():
    T = Tally()
    try:
        tree = llama_tree()
    except Exception as e:  # noqa: BLE001
        T.check(False, "fetch llama.cpp source", str(e))
        return T.summary()
    report = []
    for name in sys.argv[1:] or VOCABS:
        check_vocab(T, tree, name, report)
    print("\n".join(report))
    return T.summary()


if __name__ == "__main__":
    sys.exit(main())
