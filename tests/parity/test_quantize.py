#!/usr/bin/env python3
"""Parity of `nibble quantize` with llama.cpp's quantize (llama-cpp-python's llama_model_quantize):
  1. byte-identical output files for q8_0, q4_0 and q4_k_m on two tiny but loadable Gemma 3 models
     written here with the gguf package (2 layers, a 512-token SentencePiece vocabulary): model A
     is F32 with n_embd 256 and ffn rows of 640 (Q4_K/Q6_K fall back to Q5_0/Q8_0 there), model B is
     F16 with n_embd 320 (every row falls back, the tied embedding takes Q8_0);
  2. the same recipes plus mxfp4 (llama.cpp's MXFP4_MOE with --pure: every weight MXFP4) on the
     small F16 file of every family tests/parity/make_family_models.py writes (llama.cpp's names
     and shapes per architecture: fused q|k|v, biases, q/k norms, RoPE factor tensors);
  3. nibble's q8_0 / q4_0 / q4_k_m / mxfp4 / nvfp4 of the real Gemma 3 270M (when models/ has it)
     load in llama_cpp.Llama, give greedy text made of words, and give the same next-token
     distributions in llama.cpp as in nibble within the runtime parity bounds (384 positions).
Prints `N passed, N failed` last; exits non-zero on any failure.
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFWriter, GGUFValueType, TokenType

import llama_cpp

sys.path.insert(0, os.path.dirname(__file__))
from nbctypes import Model, kl_rows, llama_logits, quiet_llama  # noqa: E402
from tally import Tally  # noqa: E402
from test_runtime import N_POS, TEXTS  # noqa: E402
import make_family_models as fam  # noqa: E402

BUILD = os.environ.get('NB_BUILD', 'build')
NIBBLE = os.path.join(BUILD, 'nibble')
REAL = 'models/gemma-3-270m-q4_k_m.gguf'
REAL_RECIPES = ['q8_0', 'q4_0', 'q4_k_m', 'mxfp4', 'nvfp4']
FTYPES = {'q8_0': llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, 'q4_0': llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0,
          'q4_k_m': llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M}

T = Tally()




def vocab():
    """<pad> <eos> <bos> <unk>, Gemma's turn markers, 256 byte tokens, then word pieces."""
    toks = [('<pad>', TokenType.CONTROL), ('<eos>', TokenType.CONTROL), ('<bos>', TokenType.CONTROL),
            ('<unk>', TokenType.UNKNOWN), ('<start_of_turn>', TokenType.CONTROL),
            ('<end_of_turn>', TokenType.CONTROL)]
    toks += [('<0x%02X>' % b, TokenType.BYTE) for b in range(256)]
    words = ['\u2581the', '\u2581a', '\u2581of', '\u2581to', '\u2581and', '\u2581in', '\u2581is', '\u2581it', '\u2581that',
             '\u2581cat', '\u2581dog', '\u2581sat', '\u2581on', '\u2581mat', '\u2581red', '\u2581blue', '\u2581sky',
             '\u2581', 'e', 't', 'a', 'o', 'n', 's', 'r', 'h', 'l', 'd', 'i', 'c', 'u', 'm']
    toks += [(w, TokenType.NORMAL) for w in words]
    n = 0
    while len(toks) < 512:  # filler pieces so the vocabulary has a round size
        toks.append(('\u2581w%d' % n, TokenType.NORMAL))
        n += 1
    scores = [0.0] * 6 + [0.0] * 256 + [-float(i) for i in range(len(toks) - 262)]
    return [t for t, _ in toks], scores, [int(k) for _, k in toks]


def write_model(path, n_embd, n_ff, dtype, seed):
    rng = np.random.default_rng(seed)
    n_head, n_kv, hd, n_layer = n_embd // 64, 1, 64, 2
    w = GGUFWriter(path, 'gemma3')
    w.add_name('tiny gemma3 %d' % n_embd)
    w.add_context_length(1024)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_sliding_window(128)
    w.add_file_type(0 if dtype == np.float32 else 1)
    toks, scores, types = vocab()
    w.add_tokenizer_model('llama')
    w.add_tokenizer_pre('default')
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)

    def mat(name, rows, cols):  # numpy (rows, cols) = GGUF ne {cols, rows}
        x = rng.standard_normal((rows, cols)).astype(np.float32) * (0.5 / np.sqrt(cols))
        x[rng.random((rows, cols)) < 0.002] *= 10  # a few outliers, as real weights have
        w.add_tensor(name, x.astype(dtype))

    def norm(name, n):
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    mat('token_embd.weight', len(toks), n_embd)
    norm('output_norm.weight', n_embd)
    for l in range(n_layer):
        b = 'blk.%d.' % l
        norm(b + 'attn_norm.weight', n_embd)
        mat(b + 'attn_q.weight', n_head * hd, n_embd)
        mat(b + 'attn_k.weight', n_kv * hd, n_embd)
        mat(b + 'attn_v.weight', n_kv * hd, n_embd)
        norm(b + 'attn_q_norm.weight', hd)
        norm(b + 'attn_k_norm.weight', hd)
        mat(b + 'attn_output.weight', n_embd, n_head * hd)
        norm(b + 'post_attention_norm.weight', n_embd)
        norm(b + 'ffn_norm.weight', n_embd)
        mat(b + 'ffn_gate.weight', n_ff, n_embd)
        mat(b + 'ffn_up.weight', n_ff, n_embd)
        mat(b + 'ffn_down.weight', n_embd, n_ff)
        norm(b + 'post_ffw_norm.weight', n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llama_quantize(src, dst, ftype, threads=2, pure=False):
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.pure = pure
    p.nthread = threads
    p.allow_requantize = True
    return llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))


def nibble_quantize(src, dst, recipe, *extra):
    r = subprocess.run([NIBBLE, 'quantize', src, dst, recipe, '-t', '2', *extra], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr)
    return r.returncode


def first_difference(a, b):
    n = min(len(a), len(b))
    d = next((i for i in range(n) if a[i] != b[i]), n)
    return 'sizes %d vs %d, first difference at byte %d' % (len(a), len(b), d)


def byte_parity(tmp):
    models = {'A_f32_256': (256, 640, np.float32, 1), 'B_f16_320': (320, 640, np.float16, 2)}
    for name, (e, ff, dt, seed) in models.items():
        src = os.path.join(tmp, name + '.gguf')
        write_model(src, e, ff, dt, seed)
        for recipe, ftype in FTYPES.items():
            ll, nb = os.path.join(tmp, 'll.gguf'), os.path.join(tmp, 'nb.gguf')
            rc = llama_quantize(src, ll, ftype)
            T.check(rc == 0, '%s %s: llama.cpp quantize returned %d' % (name, recipe, rc))
            T.check(nibble_quantize(src, nb, recipe) == 0, '%s %s: nibble quantize failed' % (name, recipe))
            if rc != 0 or not os.path.exists(nb):
                continue
            a, b = open(ll, 'rb').read(), open(nb, 'rb').read()
            T.check(a == b, '%s %s: files differ: %s' % (name, recipe, first_difference(a, b)))


def family_parity(tmp):
    """Every family's small F16 file: nibble's q8_0 / q4_0 / q4_k_m / mxfp4 byte for byte as llama.cpp's."""
    paths, _ = fam.ensure(variants=("f16",), bad=False, log=lambda *a: None)
    recipes = dict(FTYPES, mxfp4=llama_cpp.LLAMA_FTYPE_MOSTLY_MXFP4_MOE)
    for (family, _, _), src in sorted(paths.items()):
        same = 0
        for recipe, ftype in recipes.items():
            ll, nb = os.path.join(tmp, 'll.gguf'), os.path.join(tmp, 'nb.gguf')
            rc = llama_quantize(src, ll, ftype, pure=recipe == 'mxfp4')
            ok = rc == 0 and nibble_quantize(src, nb, recipe) == 0
            T.check(ok, '%s %s: quantize failed (llama.cpp returned %d)' % (family, recipe, rc))
            if not ok:
                continue
            a, b = open(ll, 'rb').read(), open(nb, 'rb').read()
            T.check(a == b, '%s %s: files differ: %s' % (family, recipe, first_difference(a, b)))
            same += a == b
        print('%-7s %d of %d recipes byte-identical to llama.cpp\'s' % (family, same, len(recipes)))


def runs_in_llama(tmp):
    """nibble's quantizations of the real model in llama.cpp: greedy text made of words, and the same
    next-token distributions as nibble gives on the same file, within the runtime parity bounds
    (tests/parity/test_runtime.py): mean KL at most 1.25x llama.cpp's own spread between its two
    attention paths on that file, same top token within 3 points of llama.cpp's own rate."""
    if not os.path.exists(REAL):
        print('skipped: %s absent (make demo fetches it)' % REAL)
        return
    tok = llama_cpp.Llama(model_path=REAL, vocab_only=True, verbose=False)
    seqs = [tok.tokenize(t.encode(), add_bos=True)[:N_POS] for t in TEXTS]
    prompt = 'The capital of France is'
    for recipe in REAL_RECIPES:
        out = os.path.join(tmp, 'real_%s.gguf' % recipe)
        if nibble_quantize(REAL, out, recipe) != 0:
            T.check(False, 'real model %s: nibble quantize failed' % recipe)
            continue
        llm, ref = llama_logits(out, seqs, flash_attn=False)
        ref_fa = np.concatenate(llama_logits(out, seqs, flash_attn=True)[1])
        ref = np.concatenate(ref)
        nb = Model(out, n_ctx=1024, n_threads=2)
        mine = []
        for toks in seqs:
            nb.reset()
            mine.append(nb.eval(toks))
        nb.close()
        mine = np.concatenate(mine)
        kl, kl_self = kl_rows(ref, mine).mean(), kl_rows(ref, ref_fa).mean()
        top = float((ref.argmax(1) == mine.argmax(1)).mean())
        top_self = float((ref.argmax(1) == ref_fa.argmax(1)).mean())
        bound = max(0.001, 1.25 * kl_self)
        T.check(np.isfinite(mine).all() and kl <= bound,
                'real %s: mean KL(llama||nibble) %.6f above %.6f' % (recipe, kl, bound))
        T.check(top >= min(0.99, top_self - 0.03),
                'real %s: same top token %.2f %% vs llama self %.2f %%' % (recipe, 100 * top, 100 * top_self))
        llm.reset()
        text = llm(prompt, max_tokens=12, temperature=0.0)['choices'][0]['text']
        words = [w for w in text.split() if any(c.isalpha() for c in w)]
        T.check(len(words) >= 2, 'real %s: greedy text %r has no words' % (recipe, text))
        print('%-7s KL(llama||nibble) %.6f (llama self %.6f), same top %.1f %% (self %.1f %%) over %d positions; %r'
              % (recipe, kl, kl_self, 100 * top, 100 * top_self, len(ref), text))
        del llm
        os.remove(out)


def main():
    if not os.path.exists(NIBBLE):
        T.check(False, '%s is not built' % NIBBLE)
        return T.summary()
    llama_cpp.llama_backend_init()
    quiet_llama()
    with tempfile.TemporaryDirectory() as tmp:
        byte_parity(tmp)
        family_parity(tmp)
        runs_in_llama(tmp)
    return T.summary()


if __name__ == '__main__':
    sys.exit(main())
