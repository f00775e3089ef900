#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/).

Run from anywhere: python3 tests/fuzz/make_corpus.py. The output is committed;
rerun it only when the input layouts in message_fuzz.cc / reader_fuzz.cc or
the fixtures change.

message_fuzz: byte 0 = flags (bit 0: first frame is a peer identity), then
frames as [u16 LE length][bytes]. Headers are MessageHeader (proto/
wire.proto) encoded by hand: field numbers and types must match it.
reader fuzzers: byte 0 = option bits (see reader_fuzz.cc), then the file.
model_file_fuzz: a model file's bytes. Its safetensors seed (bibtex_h16) is
a model tether-export wrote; the npz seeds are the same tensors and
metadata as an npz (checkpoint/model_file.h), stored as tether-export and
numpy.savez write it, and deflated as numpy.savez_compressed does.
"""
import json
import os
import struct
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# MessageType values (proto/wire.proto).
HELLO, PULL, PUSH, CLOCK, BARRIER, BYE, ERROR_REPLY, PULL_REPLY = 1, 5, 7, 9, 11, 3, 16, 6


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(num, value):
    return varint(num << 3) + varint(value)


def field_bytes(num, data):
    return varint((num << 3) | 2) + varint(len(data)) + data


def header(type_, table=0, request=1, rank=0, clock=0, num_keys=None, dim=None, num_values=None,
           body=None, version=None):
    h = field_varint(1, type_) + field_varint(2, table) + field_varint(3, request)
    h += field_varint(4, rank) + field_varint(5, clock)
    if num_keys is not None:
        h += field_varint(6, num_keys)
    if dim is not None:
        h += field_varint(7, dim)
    if num_values is not None:
        h += field_varint(8, num_values)
    if version is not None:  # protocol_version = 32, the same number in every version
        h += field_varint(32, version)
    if body is not None:  # (oneof member number, body bytes)
        h += field_bytes(body[0], body[1])
    return h


# MessageHeader.body members (proto/wire.proto) and their bodies' fields.
HELLO_BODY, BARRIER_BODY, ERROR_REPLY_BODY = 200, 208, 211


def hello_body(staleness, job_id, shard, tables):
    # HelloBody: job_id (1), shard (3), num_shards (4), tables (5), staleness (6)
    b = field_bytes(1, job_id) + field_varint(3, shard) + field_varint(4, 1)
    for t in tables:
        b += field_bytes(5, t)
    return b + field_varint(6, staleness)


def hello_v3(staleness, job_id, shard):
    # A HELLO of protocol version 3: every field in the header (staleness 10,
    # job id 30, protocol version 32, shard and count 33, 34).
    return (field_varint(10, staleness) + field_bytes(30, job_id) + field_varint(32, 3) +
            field_varint(33, shard) + field_varint(34, 1))


def message(frames, routed=False):
    out = bytes([1 if routed else 0])
    for f in frames:
        out += struct.pack('<H', len(f)) + f
    return out


def keys(*ks):
    return b''.join(struct.pack('<Q', k) for k in ks)


def floats(*vs):
    return b''.join(struct.pack('<f', v) for v in vs)


def write(target, name, data):
    d = os.path.join(HERE, 'corpus', target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


def message_corpus():
    ident = b'w0-123-456'
    seeds = {
        # TableSpec: id (1), name (2), kind (3: 0 row, 1 dense), dim (4), size (5)
        'hello': [header(HELLO, version=5, body=(HELLO_BODY, hello_body(
                      2, b'job', 0, (field_varint(1, 0) + field_bytes(2, b'w1') + field_varint(4, 2),
                                     field_varint(1, 1) + field_bytes(2, b'b1') + field_varint(3, 1) +
                                     field_varint(5, 2))))),
                  b'', b''],
        'hello_v3': [header(HELLO) + hello_v3(2, b'job', 0), b'', b''],
        'pull_rows': [header(PULL, num_keys=3, dim=2), keys(1, 5, 9), b''],
        'pull_dense': [header(PULL, table=1), b'', b''],
        'push_rows': [header(PUSH, num_keys=2, dim=2, num_values=4), keys(3, 7), floats(1, -1, 0.5, 2)],
        'push_dense': [header(PUSH, table=1, num_values=2), b'', floats(0.25, -0.5)],
        'clock': [header(CLOCK, clock=3), b'', b''],
        'barrier': [header(BARRIER, body=(BARRIER_BODY, field_varint(1, 4880))), b'', b''],
        'bye': [header(BYE), b'', b''],
        'pull_reply': [header(PULL_REPLY, num_values=2, dim=2), b'', floats(0.1, 0.2)],
        'error_reply': [header(ERROR_REPLY, body=(ERROR_REPLY_BODY, field_bytes(1, b'bad'))), b'', b''],
        'wrong_count': [header(PULL, num_keys=3, dim=2), keys(1, 2), b''],
        'huge_count': [header(PULL, num_keys=1 << 61, dim=2), b'', b''],
        'two_frames': [header(PULL), b''],
        'garbage': [b'garbage'],
    }
    for name, frames in seeds.items():
        write('message_fuzz', name, message(frames))
        write('message_fuzz', name + '_routed', message([ident] + frames, routed=True))


def reader_corpus():
    cases = os.path.join(ROOT, 'tests', 'data', 'cases')
    fixtures = os.path.join(ROOT, 'tests', 'data', 'readers')
    xmc = ['C01_xmc_header_count_mismatch.txt', 'C01_xmc_header_test_split.txt',
           'C02_zero_based_no_zero_index.txt', 'C05_empty_label_list.txt']
    xmc_fix = ['xmc_partition.txt', 'xmc_missing_header.txt', 'xmc_feature_out_of_range.txt',
               'xmc_label_out_of_range.txt', 'xmc_space_then_label.txt', 'xmc_zero_dims.txt']
    libsvm = ['C02_one_based_with_zero.txt', 'C04_unsorted_duplicate_indices.txt',
              'C06_crlf_trailing_ws.txt', 'C06_crlf_trailing_ws_clean_twin.txt', 'C08_nan_inf_values.txt',
              'C10_no_trailing_newline.txt', 'C11_gzip_input.txt.gz', 'C11_gzip_input_plain_twin.txt']
    libsvm_fix = ['libsvm_comments.txt', 'libsvm_multilabel.txt', 'libsvm_extreme_values.txt',
                  'libsvm_float_overflow.txt', 'truncated.gz', 'binary_garbage.txt']
    # Option bytes: base 0 and 1, error/sum policies, drop_row, and share checks.
    option_bytes = [0x00, 0x01, 0x83, 0x89, 0xC1]
    for target, names in (('xmc_reader_fuzz', [(cases, n) for n in xmc] + [(fixtures, n) for n in xmc_fix]),
                          ('libsvm_reader_fuzz',
                           [(cases, n) for n in libsvm] + [(fixtures, n) for n in libsvm_fix])):
        for d, n in names:
            with open(os.path.join(d, n), 'rb') as f:
                data = f.read()
            for o in option_bytes:
                write(target, '%s_%02x' % (n.replace('.', '_'), o), bytes([o]) + data)


def npy(descr, shape, data):
    """An NPY 1.0 file as numpy.save (and Tether's writer) lays it out."""
    dims = ', '.join(str(d) for d in shape) + (',' if len(shape) == 1 else '')
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    d += ' ' * ((64 - (10 + len(d) + 1) % 64) % 64) + '\n'
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(d)) + d.encode('latin1') + data


def model_file_corpus():
    d = os.path.join(HERE, 'corpus', 'model_file_fuzz')
    with open(os.path.join(d, 'bibtex_h16'), 'rb') as f:
        st = f.read()
    (n,) = struct.unpack('<Q', st[:8])
    header = json.loads(st[8:8 + n])
    data = st[8 + n:]
    descr = {'F32': '<f4', 'U64': '<u8', 'I64': '<i8'}
    meta = json.dumps(header['__metadata__'], sort_keys=True, separators=(',', ':')).encode()

    def members(rows):
        """The npz members; with `rows`, each row table keeps only its first rows (a small seed that
        mutates fast: the rows absent are the initializer's, as in any model)."""
        out = []
        for name, t in header.items():
            if name == '__metadata__':
                continue
            b, e = t['data_offsets']
            shape, blob = list(t['shape']), data[b:e]
            row_table = name.endswith('.keys') or name + '.keys' in header
            if rows is not None and row_table:
                blob = blob[:rows * len(blob) // shape[0]]
                shape[0] = rows
            out.append((name + '.npy', npy(descr[t['dtype']], shape, blob)))
        return out + [('__metadata__.npy', npy('|u1', [len(meta)], meta))]

    for seed, method, rows in (('bibtex_h16_npz', zipfile.ZIP_STORED, None),
                               ('bibtex_h16_npz_deflated', zipfile.ZIP_DEFLATED, None),
                               ('bibtex_h16_npz_3rows', zipfile.ZIP_STORED, 3),
                               ('bibtex_h16_npz_3rows_deflated', zipfile.ZIP_DEFLATED, 3)):
        with zipfile.ZipFile(os.path.join(d, seed), 'w', method) as z:
            for name, blob in members(rows):
                z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), blob, method)


if __name__ == '__main__':
    message_corpus()
    reader_corpus()
    model_file_corpus()
    sys.exit(0)
