"""ctypes bindings to build/libnibble.so for the parity scripts: a model, a context, evaluation."""
import ctypes
import os
import re

import numpy as np


class CtxParams(ctypes.Structure):
    """nb_ctx_params (include/nibble.h), field for field."""
    _fields_ = [(f, ctypes.c_int) for f in ("n_ctx", "n_batch", "type_k", "type_v", "flash_attn", "swa_full",
                                            "fast_prefill", "fast_batch", "n_threads")] + [("pool", ctypes.c_void_p)]


class ModelInfo(ctypes.Structure):
    """nb_model_info (include/nibble.h), field for field."""
    _fields_ = [("arch", ctypes.c_char * 32), ("name", ctypes.c_char * 96)] + \
        [(f, ctypes.c_int) for f in ("n_layer", "n_embd", "n_ff", "n_head", "n_head_kv", "head_dim", "n_vocab",
                                     "n_ctx_train", "sliding_window", "n_sliding")] + \
        [("rope_base", ctypes.c_float), ("rope_base_local", ctypes.c_float), ("rms_eps", ctypes.c_float),
         ("weight_bytes", ctypes.c_uint64), ("n_rot", ctypes.c_int), ("rope_freq_scale", ctypes.c_float),
         ("rope_scaling", ctypes.c_char * 16), ("attn_softcap", ctypes.c_float), ("final_softcap", ctypes.c_float)]


_QUIET = None


def quiet_llama():
    """Silences llama.cpp's log for the rest of the process. The callback lives in this module:
    llama.cpp keeps the pointer, and calling a collected one crashes the process."""
    global _QUIET
    if _QUIET is None:
        import llama_cpp
        _QUIET = llama_cpp.llama_log_callback(lambda level, text, data: None)
        llama_cpp.llama_log_set(_QUIET, ctypes.c_void_p())


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = os.path.join(ROOT, "include", "nibble.h")
_C_TYPES = {"int": ctypes.c_int, "float": ctypes.c_float, "uint64_t": ctypes.c_uint64, "char": ctypes.c_char}


def header_fields(struct):
    """The fields of `typedef struct STRUCT {...}` in include/nibble.h as ctypes (name, type) pairs,
    in order: plain ints, floats and uint64_t, char arrays, and any pointer as c_void_p (check_mirror
    takes c_char_p for one)."""
    text = re.sub(r"/\*.*?\*/", "", open(HEADER).read(), flags=re.S)
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (struct, struct), text, re.S)
    if body is None:
        raise RuntimeError(f"{HEADER}: no typedef struct {struct}")
    fields = []
    for decl in filter(None, (re.sub(r"\bconst\s+", "", d).strip() for d in body.group(1).split(";"))):
        ctype, names = decl.split(None, 1)
        for name in (n.strip() for n in names.split(",")):
            m = re.fullmatch(r"(\*?)(\w+)(?:\[(\d+)\])?", name)
            if m is None or (not m.group(1) and ctype not in _C_TYPES):
                raise RuntimeError(f"{HEADER}: {struct}: a field this binding cannot mirror: {decl}")
            t = ctypes.c_void_p if m.group(1) else _C_TYPES[ctype]
            fields.append((m.group(2), t * int(m.group(3)) if m.group(3) else t))
    return fields


def check_mirror(cls, struct):
    """Raises if a Structure's fields are not the header's, name for name and type for type: a
    field added to nibble.h and not here would otherwise shift every later one (a hang or a crash)."""
    def shape(t):
        if t in (ctypes.c_void_p, ctypes.c_char_p):
            return ("pointer", ctypes.sizeof(t))
        return (t._type_.__name__ if issubclass(t, ctypes.Array) else t.__name__, ctypes.sizeof(t))
    want = [(n, shape(t)) for n, t in header_fields(struct)]
    have = [(n, shape(t)) for n, t in cls._fields_]
    for i in range(max(len(want), len(have))):
        w, h = want[i] if i < len(want) else None, have[i] if i < len(have) else None
        if w != h:
            raise RuntimeError(f"tests/parity/nbctypes.py: {cls.__name__} field {i} is {h}, but {struct} in "
                               f"include/nibble.h has {w} there")


def load_lib():
    check_mirror(CtxParams, "nb_ctx_params")
    check_mirror(ModelInfo, "nb_model_info")
    check_mirror(ChatMsg, "nb_chat_msg")
    build = os.environ.get("NB_BUILD", "build")
    lib = ctypes.CDLL(os.path.join(build, "libnibble.so"))
    lib.nb_last_error.restype = ctypes.c_char_p
    lib.nb_model_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.nb_model_free.argtypes = [ctypes.c_void_p]
    lib.nb_model_get_info.argtypes = [ctypes.c_void_p]
    lib.nb_model_get_info.restype = ctypes.POINTER(ModelInfo)
    lib.nb_ctx_default_params.restype = CtxParams
    lib.nb_ctx_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(CtxParams), ctypes.POINTER(ctypes.c_void_p)]
    lib.nb_ctx_free.argtypes = [ctypes.c_void_p]
    lib.nb_ctx_reset.argtypes = [ctypes.c_void_p]
    lib.nb_ctx_eval.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    lib.nb_chat_template_name.restype = ctypes.c_char_p
    lib.nb_chat_template_name.argtypes = [ctypes.c_int]
    lib.nb_chat_template_find.argtypes = [ctypes.c_char_p]
    lib.nb_chat_detect.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int)]
    lib.nb_chat_apply.argtypes = [ctypes.c_int, ctypes.POINTER(ChatMsg), ctypes.c_size_t, ctypes.c_int, ctypes.c_char_p,
                                  ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
    return lib


class ChatMsg(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


def chat_detect(lib, text):
    """nibble's template id for template text (bytes), or None when it knows none."""
    tid = ctypes.c_int()
    return tid.value if lib.nb_chat_detect(text, len(text), ctypes.byref(tid)) == 0 else None


def chat_apply(lib, tid, msgs, add_ass):
    """nibble's rendering (bytes) of [(role, content)] (bytes) in template tid."""
    arr = (ChatMsg * max(len(msgs), 1))(*[ChatMsg(r, c) for r, c in msgs])
    n = ctypes.c_size_t()
    lib.nb_chat_apply(tid, arr, len(msgs), int(add_ass), None, 0, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value + 1)
    if lib.nb_chat_apply(tid, arr, len(msgs), int(add_ass), buf, n.value, ctypes.byref(n)) != 0:
        raise RuntimeError(f"nb_chat_apply: {lib.nb_last_error().decode()}")
    return buf.raw[:n.value]


class Model:
    """A nibble model and one context; eval() returns logits as float32 rows."""

    def __init__(self, path, n_ctx=1024, n_threads=2, kv_f32=False, flash_attn=None, type_k=None, type_v=None,
                 swa_full=False, fast_prefill=False):
        self.lib = load_lib()
        self.m = ctypes.c_void_p()
        self._check(self.lib.nb_model_load(path.encode(), ctypes.byref(self.m)), "load")
        p = self.lib.nb_ctx_default_params()
        p.n_ctx, p.n_threads = n_ctx, n_threads
        if kv_f32:
            p.type_k = p.type_v = 0  # NB_TYPE_F32
        if flash_attn is not None:
            p.flash_attn = int(flash_attn)
        if type_k is not None:
            p.type_k = type_k
        if type_v is not None:
            p.type_v = type_v
        p.swa_full = int(swa_full)
        p.fast_prefill = int(fast_prefill)
        self.c = ctypes.c_void_p()
        self._check(self.lib.nb_ctx_create(self.m, ctypes.byref(p), ctypes.byref(self.c)), "context")
        self.info = self.lib.nb_model_get_info(self.m).contents
        self.n_vocab = self.info.n_vocab

    def _check(self, status, what):
        if status != 0:
            raise RuntimeError(f"nibble {what}: {self.lib.nb_last_error().decode()}")

    def reset(self):
        self.lib.nb_ctx_reset(self.c)

    def eval(self, tokens, all_logits=True):
        arr = (ctypes.c_int32 * len(tokens))(*tokens)
        rows = len(tokens) if all_logits else 1
        out = np.empty((rows, self.n_vocab), dtype=np.float32)
        self._check(self.lib.nb_ctx_eval(self.c, arr, len(tokens), out.ctypes.data, int(all_logits)), "eval")
        return out

    OBSERVER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_float),
                                ctypes.c_int64, ctypes.c_int64)

    def observe(self, fn):
        """fn(tensor_name, x) sees the input rows x (n_tok, n_in) of every weight matrix product."""
        def call(_user, name, x, n_tok, n_in):
            fn(name.decode(), np.ctypeslib.as_array(x, shape=(n_tok, n_in)).copy())
        self._observer = self.OBSERVER(call)  # kept alive as long as the context
        self.lib.nb_ctx_set_observer.argtypes = [ctypes.c_void_p, self.OBSERVER, ctypes.c_void_p]
        self.lib.nb_ctx_set_observer(self.c, self._observer, None)

    def close(self):
        self.lib.nb_ctx_free(self.c)
        self.lib.nb_model_free(self.m)


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def kl_rows(p_logits, q_logits):
    """KL(P || Q) per row, P the reference."""
    lp, lq = log_softmax(p_logits), log_softmax(q_logits)
    return (np.exp(lp) * (lp - lq)).sum(axis=-1)


def fetched(script):
    """The path a fetch script prints (scripts/fetch-model.sh: the default model, fetch-text.sh: the
    evaluation text), fetched when absent."""
    import subprocess
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts", script)], check=True, capture_output=True,
                         text=True).stdout
    return os.path.join(ROOT, out.strip().splitlines()[-1])


def model_path():
    return fetched("fetch-model.sh")


def llama_logits(path, seqs, n_ctx=1024, **kw):
    """llama.cpp's logits (float32 rows) for each token sequence from an empty cache, and the Llama."""
    from llama_cpp import Llama
    llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=2, logits_all=True, verbose=False, **kw)
    out = []
    for toks in seqs:
        llm.reset()
        llm.eval(toks)
        out.append(np.array(llm.scores[:len(toks)], dtype=np.float32))
    return llm, out

