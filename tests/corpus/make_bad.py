#!/usr/bin/env python3
"""Writes tests/corpus/bad/*.bad: one small GGUF file per class of damage the reader must refuse,
and MANIFEST, which says for each file the status nibble must return and a piece of text its
message must contain (the field it names). tests/test_gguf.c checks every line.

The files are built here from the GGUF layout with struct (independent of nibble's writer), from
one valid base file that each case damages in one place. Cases marked CVE follow the published
GGUF reader vulnerabilities (integer overflow in counts, sizes and padding; array element types a
reader did not expect). A crash the fuzzer finds is added as a case below, named fuzz_*.

Usage: python3 tests/corpus/make_bad.py [OUTDIR]   (default: tests/corpus/bad next to this file)
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
F32_T, Q8_0, Q4_K = 0, 8, 12


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack('<Q', len(b)) + b


def kv(key, vtype, payload):
    return s(key) + struct.pack('<I', vtype) + payload


def tinfo(name, ne, ttype, offset):
    return s(name) + struct.pack('<I', len(ne)) + b''.join(struct.pack('<q', n) for n in ne) + \
        struct.pack('<IQ', ttype, offset)


def gguf(kvs, tensors, data=b'', version=3, n_tensors=None, n_kv=None, align=32, pad=True):
    head = b'GGUF' + struct.pack('<Iqq', version, len(tensors) if n_tensors is None else n_tensors,
                                 len(kvs) if n_kv is None else n_kv)
    head += b''.join(kvs) + b''.join(tensors)
    if pad:
        head += b'\0' * (-len(head) % align)
    return head + data


BASE_KVS = [
    kv('general.architecture', STRING, s('gemma3')),
    kv('gemma3.block_count', U32, struct.pack('<I', 1)),
    kv('tokenizer.ggml.tokens', ARRAY, struct.pack('<IQ', STRING, 2) + s('a') + s('b')),
]
# two tensors: a 64-float vector and a 32x2 Q8_0 matrix, data 256 + 68 bytes
T0 = tinfo('norm.weight', [64], F32_T, 0)
T1 = tinfo('blk.0.w.weight', [32, 2], Q8_0, 256)
DATA = bytes(256) + bytes(68) + bytes(-68 % 32)


def base(**kw):
    return gguf(BASE_KVS, [T0, T1], DATA, **kw)


def with_kv(extra, **kw):
    return gguf(BASE_KVS + [extra], [T0, T1], DATA, **kw)


def with_t(t1, data=DATA, **kw):
    return gguf(BASE_KVS, [T0, t1], data, **kw)


CASES = [
    # name, bytes, status, message substring
    ('empty', b'', 'FORMAT', 'empty'),
    ('bad_magic', b'GGUX' + base()[4:], 'FORMAT', 'magic at offset 0'),
    ('truncated_header', base()[:10], 'FORMAT', 'n_tensors at offset 8'),
    ('version_1', base(version=1), 'UNSUPPORTED', 'v1'),
    ('version_unknown', base(version=7), 'UNSUPPORTED', 'unknown version 7'),
    ('big_endian', b'GGUF' + struct.pack('>Iqq', 3, 2, 3) + base()[24:], 'UNSUPPORTED', 'big-endian'),
    # CVE class: counts that overflow an allocation size
    ('n_tensors_huge', base(n_tensors=(1 << 63) - 1), 'FORMAT', 'n_tensors at offset 8'),
    ('n_tensors_negative', base(n_tensors=-1), 'FORMAT', 'n_tensors at offset 8'),
    ('n_kv_huge', base(n_kv=1 << 61), 'FORMAT', 'n_kv at offset 16'),
    ('n_kv_more_than_present', base(n_kv=5), 'FORMAT', 'kv 4'),
    ('key_length_huge', gguf([struct.pack('<Q', (1 << 64) - 1) + bytes(32)], [], n_kv=1, pad=False), 'FORMAT', 'limit 1024'),
    ('key_past_end', gguf([struct.pack('<Q', 900) + b'general.'], [], n_kv=1, pad=False), 'FORMAT', 'past the end'),
    ('key_empty', with_kv(kv('', U32, struct.pack('<I', 1))), 'FORMAT', 'empty key'),
    ('key_nul_byte', with_kv(kv('general.a\0b', U32, struct.pack('<I', 1))), 'FORMAT', 'NUL byte'),
    ('key_duplicate', with_kv(kv('gemma3.block_count', U32, struct.pack('<I', 2))), 'FORMAT', "duplicate key 'gemma3.block_count'"),
    ('value_type_unknown', with_kv(kv('x.y', 13, struct.pack('<I', 1))), 'FORMAT', "value type of key 'x.y'"),
    ('value_truncated', gguf([kv('x.y', U64, b'\1\2\3')], [], pad=False), 'FORMAT', "value of key 'x.y'"),
    ('bool_not_0_or_1', with_kv(kv('x.flag', BOOL, b'\x02')), 'FORMAT', 'bool byte 2'),
    ('string_length_huge', with_kv(kv('x.s', STRING, struct.pack('<Q', (1 << 64) - 8))), 'FORMAT', 'string value'),
    # CVE class: arrays whose element type or count a reader did not expect
    ('array_nested', with_kv(kv('x.a', ARRAY, struct.pack('<IQ', ARRAY, 1))), 'FORMAT', 'nested arrays'),
    ('array_elem_type_unknown', with_kv(kv('x.a', ARRAY, struct.pack('<IQ', 99, 1))), 'FORMAT', 'array element type'),
    ('array_size_overflow', with_kv(kv('x.a', ARRAY, struct.pack('<IQ', U32, 1 << 62))), 'FORMAT', "value of key 'x.a'"),
    ('array_strings_count_huge', with_kv(kv('x.a', ARRAY, struct.pack('<IQ', STRING, 1 << 60))), 'FORMAT', 'strings need'),
    ('array_string_past_end', gguf([kv('x.a', ARRAY, struct.pack('<IQ', STRING, 2) + s('ok') + struct.pack('<Q', 1 << 40))], [], pad=False),
     'FORMAT', "element 1 of key 'x.a'"),
    ('alignment_not_power_of_two', with_kv(kv('general.alignment', U32, struct.pack('<I', 48))), 'FORMAT', 'general.alignment'),
    ('alignment_zero', with_kv(kv('general.alignment', U32, struct.pack('<I', 0))), 'FORMAT', 'general.alignment'),
    ('alignment_too_large', with_kv(kv('general.alignment', U32, struct.pack('<I', 1 << 31))), 'FORMAT', 'general.alignment'),
    ('alignment_wrong_type', with_kv(kv('general.alignment', U64, struct.pack('<Q', 32))), 'FORMAT', 'must be u32'),
    ('tensor_name_empty', with_t(tinfo('', [32, 2], Q8_0, 256)), 'FORMAT', 'empty name'),
    ('tensor_name_too_long', with_t(tinfo('t' * 64, [32, 2], Q8_0, 256)), 'FORMAT', 'limit 63'),
    ('tensor_name_duplicate', with_t(tinfo('norm.weight', [32, 2], Q8_0, 256)), 'FORMAT', "duplicate tensor name 'norm.weight'"),
    ('tensor_info_truncated', gguf(BASE_KVS, [T0, T1[:30]], pad=False), 'FORMAT', "ne of tensor 'blk.0.w.weight'"),
    ('n_dims_zero', with_t(tinfo('blk.0.w.weight', [], Q8_0, 256)), 'FORMAT', 'n_dims'),
    ('n_dims_five', with_t(tinfo('blk.0.w.weight', [32, 1, 1, 1, 2], Q8_0, 256)), 'FORMAT', 'n_dims'),
    ('ne_zero', with_t(tinfo('blk.0.w.weight', [32, 0], Q8_0, 256)), 'FORMAT', 'ne[1]'),
    ('ne_negative', with_t(tinfo('blk.0.w.weight', [-32, 2], Q8_0, 256)), 'FORMAT', 'ne[0]'),
    # CVE class: shapes whose element count or byte size wraps
    ('ne_product_overflow', with_t(tinfo('blk.0.w.weight', [1 << 32, 1 << 32], Q8_0, 256)), 'OVERFLOW', 'element count overflows'),
    ('byte_size_overflow', with_t(tinfo('blk.0.w.weight', [1 << 31, 1 << 31], F32_T, 256)), 'OVERFLOW', 'byte size'),
    ('type_unknown', with_t(tinfo('blk.0.w.weight', [32, 2], 99, 256)), 'FORMAT', 'unknown type id 99'),
    ('type_huge', with_t(tinfo('blk.0.w.weight', [32, 2], 0xFFFFFFFF, 256)), 'FORMAT', 'unknown type id 4294967295'),
    ('type_retired', with_t(tinfo('blk.0.w.weight', [32, 2], 4, 256)), 'UNSUPPORTED', 'retired'),
    ('type_unsupported_iq4_nl', with_t(tinfo('blk.0.w.weight', [32, 2], 20, 256)), 'UNSUPPORTED', "tensor 'blk.0.w.weight' (type at offset"),
    ('type_activation_q8_k', with_t(tinfo('blk.0.w.weight', [256, 2], 15, 256)), 'UNSUPPORTED', 'q8_K'),
    ('row_not_block_multiple', with_t(tinfo('blk.0.w.weight', [640, 2], Q4_K, 256)), 'FORMAT', 'block length 256'),
    ('offset_unaligned', with_t(tinfo('blk.0.w.weight', [32, 2], Q8_0, 260)), 'FORMAT', 'multiple of the alignment 32'),
    ('offset_past_end', with_t(tinfo('blk.0.w.weight', [32, 2], Q8_0, 1 << 20)), 'FORMAT', 'ends past the data section'),
    # CVE class: offset + size (+ padding) that wraps around 2^64
    ('offset_wraps', with_t(tinfo('blk.0.w.weight', [32, 2], Q8_0, (1 << 64) - 32)), 'FORMAT', 'ends past the data section'),
    ('tensors_overlap', with_t(tinfo('blk.0.w.weight', [32, 2], Q8_0, 224)), 'FORMAT', 'overlaps'),
    ('data_truncated', base()[:-40], 'FORMAT', 'ends past the data section'),
    ('data_section_past_end', gguf(BASE_KVS, [T0, T1], pad=False), 'FORMAT', 'data section at offset'),
]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), 'bad')
    os.makedirs(out, exist_ok=True)
    lines = ['# file<TAB>status<TAB>text the message must contain; written by tests/corpus/make_bad.py']
    # control.ok is the undamaged base: it must open, so each .bad fails for its own damage only.
    for name, data, status, text in [('control', base(), 'OK', '')] + CASES:
        fname = name + ('.ok' if status == 'OK' else '.bad')
        with open(os.path.join(out, fname), 'wb') as f:
            f.write(data)
        lines.append('%s\t%s\t%s' % (fname, status, text))
    with open(os.path.join(out, 'MANIFEST'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    print('%d files in %s' % (len(CASES), out))


if __name__ == '__main__':
    main()
