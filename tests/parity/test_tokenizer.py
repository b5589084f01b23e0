"""Tokenizer parity: nibble's tokenizer against llama.cpp (llama-cpp-python) on the default model.

For every text, token ids must be identical to llama.cpp's for three settings (add_special on with
parse_special off and on, add_special off), the ids must detokenize back to the exact input bytes,
and nibble's detokenize must equal llama.cpp's llama_detokenize for the four (remove_special,
unparse_special) combinations. One more test compares every token's piece (special on and off).

nibble is called in-process through ctypes on libnibble.so ($NB_BUILD, default build), using the
GGUF reader and nb_tokenizer_from_gguf, so the whole path from file to ids is what is checked.
Each text is one counted test; the last line is "N passed, N failed".
"""
import ctypes
import tempfile
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from nbctypes import ROOT, model_path, quiet_llama  # noqa: E402
from tally import Tally  # noqa: E402


class Nibble:
    def __init__(self, lib_path, gguf_path):
        L = self.L = ctypes.CDLL(lib_path)
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        L.nb_last_error.restype = ctypes.c_char_p
        L.nb_gguf_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(vp)]
        L.nb_tokenizer_from_gguf.argtypes = [vp, ctypes.POINTER(vp)]
        L.nb_tokenize.argtypes = [vp, ctypes.c_char_p, sz, ctypes.c_int, ctypes.c_int,
                                  ctypes.POINTER(ctypes.c_int32), sz, ctypes.POINTER(sz)]
        L.nb_detokenize.argtypes = [vp, ctypes.POINTER(ctypes.c_int32), sz, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_char_p, sz, ctypes.POINTER(sz)]
        L.nb_token_to_piece.argtypes = [vp, ctypes.c_int32, ctypes.c_char_p, sz, ctypes.POINTER(sz), ctypes.c_int]
        L.nb_tokenizer_n_tokens.argtypes = [vp]
        self.g, self.t = vp(), vp()
        self.check(L.nb_gguf_open(gguf_path.encode(), ctypes.byref(self.g)))
        t0 = time.perf_counter()
        self.check(L.nb_tokenizer_from_gguf(self.g, ctypes.byref(self.t)))
        self.create_ms = (time.perf_counter() - t0) * 1e3
        self.n_vocab = L.nb_tokenizer_n_tokens(self.t)
        self.buf = ctypes.create_string_buffer(1 << 16)

    def check(self, status):
        if status != 0:
            raise RuntimeError("nibble: status %d: %s" % (status, self.L.nb_last_error().decode(errors="replace")))

    def tokenize(self, text, add_special, parse_special):
        n = ctypes.c_size_t()
        cap = len(text) + 8
        ids = (ctypes.c_int32 * cap)()
        st = self.L.nb_tokenize(self.t, text, len(text), add_special, parse_special, ids, cap, ctypes.byref(n))
        if st == 7:  # NB_ERR_RANGE: more ids than bytes (BPE reads a bad byte as U+FFFD, three bytes)
            cap = n.value
            ids = (ctypes.c_int32 * cap)()
            st = self.L.nb_tokenize(self.t, text, len(text), add_special, parse_special, ids, cap, ctypes.byref(n))
        self.check(st)
        return list(ids[:n.value])

    def detokenize(self, ids, remove_special, unparse_special):
        arr = (ctypes.c_int32 * max(1, len(ids)))(*ids)
        n = ctypes.c_size_t()
        st = self.L.nb_detokenize(self.t, arr, len(ids), remove_special, unparse_special, None, 0, ctypes.byref(n))
        if st not in (0, 7):  # NB_ERR_RANGE tells the size
            self.check(st)
        out = ctypes.create_string_buffer(n.value + 1)
        self.check(self.L.nb_detokenize(self.t, arr, len(ids), remove_special, unparse_special, out, n.value,
                                        ctypes.byref(n)))
        return out.raw[:n.value]

    def piece(self, tid, special):
        n = ctypes.c_size_t()
        self.check(self.L.nb_token_to_piece(self.t, tid, self.buf, len(self.buf), ctypes.byref(n), special))
        return self.buf.raw[:n.value]


class Reference:
    def __init__(self, gguf_path):
        import llama_cpp
        self.lc = llama_cpp
        quiet_llama()  # llama.cpp's loader and tokenizer warnings stay out of the test log
        self.llm = llama_cpp.Llama(model_path=gguf_path, vocab_only=True, verbose=False)
        self.vocab = self.llm._model.vocab

    def tokenize(self, text, add_special, parse_special):
        return self.llm.tokenize(text, add_bos=add_special, special=parse_special)

    def detokenize(self, ids, remove_special, unparse_special):
        arr = (self.lc.llama_token * max(1, len(ids)))(*ids)
        cap = 64 + 64 * len(ids)
        buf = ctypes.create_string_buffer(cap)
        n = self.lc.llama_detokenize(self.vocab, arr, len(ids), buf, cap, remove_special, unparse_special)
        assert n >= 0, "llama_detokenize buffer too small"
        return buf.raw[:n]

    def piece(self, tid, special, buf=ctypes.create_string_buffer(256)):
        n = self.lc.llama_token_to_piece(self.vocab, tid, buf, len(buf), 0, special)
        if n < 0:  # -n bytes needed
            buf = ctypes.create_string_buffer(-n)
            n = self.lc.llama_token_to_piece(self.vocab, tid, buf, len(buf), 0, special)
        assert n >= 0
        return buf.raw[:n]


# SentencePiece cannot give these back byte for byte, in llama.cpp either: a literal U+2581 reads
# as a space, and a truncated UTF-8 lead byte swallows the escaped space after it, which then
# comes back as raw bytes. Their round trip must equal llama.cpp's own.
LOSSY = "lossy"


def texts():
    t = [
        ("empty", b""),
        ("one space", b" "),
        ("one letter", b"a"),
        ("english", b"The quick brown fox jumps over the lazy dog."),
        ("prose", b"It was the best of times, it was the worst of times, it was the age of wisdom, "
                  b"it was the age of foolishness... Don't you think so? I'd say: \"yes\"!"),
        ("leading/trailing spaces", b"  hello world  "),
        ("numbers", b"3.14159 2718281828 1,000,000 -42 0x1F 1e-9 12:30"),
        ("python", b"def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n"),
        ("c code", b"int main(void) {\n\tfor (int i = 0; i < 10; i++) {\n\t\tprintf(\"%d\\n\", i);\n\t}\n\treturn 0;\n}\n"),
        ("json", b'{"key": [1, 2, {"nested": null}], "s": "a\\"b", "t": true}'),
        ("html", b"<html><body><table><tr><td>x</td></tr></table><b>bold</b></body></html>"),
        ("markdown", b"# Title\n\n* item one\n* item two\n\n```bash\nls -la\n```\n"),
        ("chinese", "\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427\u3002"
                    "\u4eba\u5de5\u667a\u80fd\u6b63\u5728\u6539\u53d8\u4e16\u754c\u3002".encode()),
        ("japanese", "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002\u30ab\u30bf\u30ab\u30ca"
                     "\u3068\u3072\u3089\u304c\u306a\u3002".encode()),
        ("korean", "\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc744 \ud1a0\ud070\ud654\ud569\ub2c8\ub2e4.".encode()),
        ("arabic", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645\u060c "
                   "\u0643\u064a\u0641 \u062d\u0627\u0644\u0643\u061f".encode()),
        ("devanagari", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e\u0964 "
                       "\u092f\u0939 \u090f\u0915 \u092a\u0930\u0940\u0915\u094d\u0937\u0923 \u0939\u0948\u0964".encode()),
        ("cyrillic", "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0421\u044a\u0435\u0448\u044c "
                     "\u0435\u0449\u0451 \u044d\u0442\u0438\u0445 \u043c\u044f\u0433\u043a\u0438\u0445 "
                     "\u0431\u0443\u043b\u043e\u043a.".encode()),
        ("greek", "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5".encode()),
        ("thai", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a".encode()),
        ("hebrew", "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd".encode()),
        ("accents", "na\u00efve caf\u00e9 r\u00e9sum\u00e9 \u00fcber Stra\u00dfe".encode()),
        ("combining marks", "e\u0301 a\u0308 n\u0303 Z\u0335\u0321\u0327a\u0336\u0322l\u0338g\u0335o".encode()),
        ("emoji", "I \u2764\ufe0f pizza \U0001f355\U0001f525\U0001f680 \U0001f600\U0001f600\U0001f600".encode()),
        ("emoji zwj", "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 \U0001f3f3\ufe0f\u200d\U0001f308 "
                      "\U0001f469\U0001f3fd\u200d\U0001f4bb".encode()),
        ("flags", "\U0001f1fa\U0001f1f8\U0001f1ef\U0001f1f5\U0001f1e9\U0001f1ea".encode()),
        ("rare symbols", "\u2200x\u2208\u211d: x\u00b2 \u2265 0 \u2234 \u221e \u2603 \U0001d11e \U0001f9ec".encode()),
        ("space runs", b"a b  c   d    e     f" + b" " * 40 + b"g"),
        ("tab runs", b"\tx\t\ty\t\t\tz" + b"\t" * 40 + b"end"),
        ("newline runs", b"line1\nline2\n\nline3\n\n\n" + b"\n" * 40 + b"end\n"),
        ("mixed whitespace", b" \t \n \r\n\t\t  \n\n \x0b\x0c x \r \t\n"),
        ("only whitespace", b"   \n\t  \n\n   "),
        ("repeated letters", b"aaaaaaa bbbbbbbbbb aa aaa aaaa zzzzzzzzzzzzzzzzzzz"),
        ("repeated punctuation", b"!!!!!!! ....... ------- ======= ******** ??? ,,,,"),
        ("turn markers", b"<start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\nHi.<end_of_turn>\n"),
        ("eos bos text", b"<bos>text<eos> more <eos><eos><pad><unk><mask>"),
        ("eog user-defined", b"before</s>after <s>x</s>"),
        ("adjacent specials", b"<start_of_turn><end_of_turn><start_of_turn>"),
        ("partial specials", b"<start_of_tur <end_of_turn <start_of_turn>> <<eos>>"),
        ("unused and image", b"<unused0><unused42><start_of_image><end_of_image>[multimodal]"),
        ("html tags inside words", b"x<b>y</b>z<h1>t</h1><code>c</code>"),
        ("invalid utf8 lone bytes", b"abc\xff\xfe\x80def\xc0\xc1"),
        ("invalid utf8 truncated", b"caf\xc3 na\xe2\x82 end\xf0\x9f\x98", LOSSY),
        ("invalid utf8 bad continuation", b"\xe2(\xa1 \xf0\x28\x8c\xbc \xc3\x28 ok"),
        ("nul and controls", b"a\x00b\x01\x02\x1b[0mc\x7f"),
        ("long word", b"Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism"),
        ("url", b"https://example.com/path/to/page?query=1&x=y#frag user@example.org"),
        ("u2581 literal", "\u2581already\u2581escaped \u2581".encode(), LOSSY),
        ("long mixed", ("The tokenizer should handle long inputs. " * 30 + "\u4f60\u597d " * 20 +
                        "\U0001f600 " * 20).encode() + b"\n\n<start_of_turn>x<end_of_turn>" * 5),
    ]
    # every text above, joined again and again and cut at 100 000 bytes (mid-character)
    blob, i = b"", 0
    while len(blob) < 100_000:
        blob += t[i % len(t)][1] + b"\n"
        i += 1
    t.append(("100 kB of all of the above", blob[:100_000], LOSSY))
    return t


def main():
    path = model_path()
    build = os.environ.get("NB_BUILD", "build")
    lib = os.path.join(ROOT, build, "libnibble.so")
    T = Tally()
    try:
        nb = Nibble(lib, path)
        ref = Reference(path)
    except Exception as e:  # noqa: BLE001 - any set-up failure is one counted failure
        T.check(False, "setup", str(e))
        return T.summary()
    t0 = time.perf_counter()
    for name, text, *flags in texts():
        problems = []
        for add_special, parse_special in ((True, False), (True, True), (False, False)):
            want = ref.tokenize(text, add_special, parse_special)
            got = nb.tokenize(text, add_special, parse_special)
            if got != want:
                k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                problems.append("add_special=%d parse_special=%d: first difference at %d: nibble %s llama.cpp %s"
                                % (add_special, parse_special, k, got[k:k + 6], want[k:k + 6]))
        plain = nb.tokenize(text, False, False)
        back = nb.detokenize(plain, False, True)
        expect = ref.detokenize(ref.tokenize(text, False, False), False, True) if LOSSY in flags else text
        if back != expect:
            problems.append("round trip: %r -> %r" % (text[:60], back[:60]))
        ids = ref.tokenize(text, True, True)
        for rs in (False, True):
            for us in (False, True):
                a, b = nb.detokenize(ids, rs, us), ref.detokenize(ids, rs, us)
                if a != b:
                    problems.append("detokenize remove_special=%d unparse_special=%d: %r vs %r" % (rs, us, a[:60], b[:60]))
        T.check(not problems, name, "; ".join(problems))
    elapsed = time.perf_counter() - t0
    # the CLI: `nibble tokenize --ids` on a file, parsed back
    exe = os.path.join(ROOT, build, "nibble")
    cli_text = b"Line one\n\tTabbed <start_of_turn>user\n  spaced\xff \xe4\xbd\xa0\xe5\xa5\xbd\n\n"
    problems = []
    with tempfile.NamedTemporaryFile(suffix=".txt") as f:
        f.write(cli_text)
        f.flush()
        for extra, ps in (([], False), (["--parse-special"], True), (["--no-bos"], False)):
            r = subprocess.run([exe, "tokenize", "-m", path, "-f", f.name, "--ids", "--no-escape"] + extra,
                               capture_output=True, text=True)
            got = [int(x) for x in r.stdout.strip().strip("[]").split(",") if x.strip()] if r.returncode == 0 else None
            want = ref.tokenize(cli_text, "--no-bos" not in extra, ps)
            if got != want:
                problems.append("%s: rc %d %s vs %s %s" % (extra, r.returncode, got, want, r.stderr[-200:]))
    T.check(not problems, "cli", "; ".join(problems))
    # every token's piece, with and without special
    bad = []
    for tid in range(nb.n_vocab):
        for special in (False, True):
            if nb.piece(tid, special) != ref.piece(tid, special):
                bad.append((tid, special))
    T.check(not bad, "pieces", "%d differ, first %s" % (len(bad), bad[:5]))
    print("tokenizer created in %.1f ms (incl. reading the GGUF arrays); %d texts checked in %.2f s"
          % (nb.create_ms, len(texts()), elapsed))
    return T.summary()


if __name__ == "__main__":
    sys.exit(main())
