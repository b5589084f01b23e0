"""An exact Gemma 3 forward pass in float64 numpy over weights dequantized by the gguf package.

No activation quantization, no fp16 anywhere: the yardstick that tells how far an engine's own
arithmetic (8-bit activations, fp16 KV cache) moves the logits. Written from the graph in
../shared/REFERENCE.md section 4, independently of src/model/.
"""
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


class GemmaRef:
    def __init__(self, path):
        r = GGUFReader(path)
        self.t = {t.name: t for t in r.tensors}
        f = r.fields
        get = lambda k: f[k].contents()
        self.E = int(get("gemma3.embedding_length"))
        self.L = int(get("gemma3.block_count"))
        self.H = int(get("gemma3.attention.head_count"))
        self.HK = int(get("gemma3.attention.head_count_kv"))
        self.D = int(get("gemma3.attention.key_length"))
        self.eps = float(get("gemma3.attention.layer_norm_rms_epsilon"))
        self.base = float(get("gemma3.rope.freq_base"))
        self.window = int(get("gemma3.attention.sliding_window"))
        self.cache = {}

    def w(self, name):
        if name not in self.cache:
            t = self.t[name]
            a = dequantize(t.data, t.tensor_type).astype(np.float64)
            self.cache[name] = a.reshape([int(x) for x in reversed(t.shape)]) if t.shape.size > 1 else a.reshape(-1)
        return self.cache[name]

    def rms(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos, base):
        half = self.D // 2
        theta = pos[:, None] * base ** (-np.arange(half) * 2.0 / self.D)[None, :]
        c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * c - b * s, a * s + b * c], -1)

    def forward(self, toks):
        n, E, H, HK, D = len(toks), self.E, self.H, self.HK, self.D
        pos = np.arange(n, dtype=np.float64)
        emb = self.w("token_embd.weight")
        x = emb[toks] * np.sqrt(E)
        gelu = lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))
        causal = np.tril(np.ones((n, n), dtype=bool))
        local_mask = causal & (pos[:, None] - pos[None, :] < self.window)
        for il in range(self.L):
            p = f"blk.{il}."
            local = il % 6 < 5
            h = self.rms(x, self.w(p + "attn_norm.weight"))
            q = (h @ self.w(p + "attn_q.weight").T).reshape(n, H, D)
            k = (h @ self.w(p + "attn_k.weight").T).reshape(n, HK, D)
            v = (h @ self.w(p + "attn_v.weight").T).reshape(n, HK, D)
            q = self.rms(q, self.w(p + "attn_q_norm.weight"))
            k = self.rms(k, self.w(p + "attn_k_norm.weight"))
            base = 10000.0 if local else self.base
            q = self.rope(q, pos, base) / np.sqrt(D)
            k = self.rope(k, pos, base)
            mask = local_mask if local else causal
            out = np.empty((n, H, D))
            for hh in range(H):
                g = hh // (H // HK)
                s = q[:, hh] @ k[:, g].T
                s = np.where(mask, s, -np.inf)
                s = np.exp(s - s.max(-1, keepdims=True))
                s /= s.sum(-1, keepdims=True)
                out[:, hh] = s @ v[:, g]
            o = out.reshape(n, H * D) @ self.w(p + "attn_output.weight").T
            x = x + self.rms(o, self.w(p + "post_attention_norm.weight"))
            h = self.rms(x, self.w(p + "ffn_norm.weight"))
            d = (gelu(h @ self.w(p + "ffn_gate.weight").T) * (h @ self.w(p + "ffn_up.weight").T)) \
                @ self.w(p + "ffn_down.weight").T
            x = x + self.rms(d, self.w(p + "post_ffw_norm.weight"))
        return self.rms(x, self.w("output_norm.weight")) @ emb.T
