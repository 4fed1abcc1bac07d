# Hostile-file corpus: generates malformed safetensors, NPY, IDX, CSV, PNG, event and ONNX files for every parser, and (--cli) runs them through the nabla command.
"""Usage:
  hostile_files.py OUTDIR               write OUTDIR/<parser>/* and OUTDIR/good/*
  hostile_files.py --cli NABLA OUTDIR   run every file through the `nabla` subcommands that take
                                        files; each run must end with an exit code (and, when it
                                        is not 0, a message on stderr), never a signal or a
                                        sanitizer report

Why generated rather than committed: a few hundred files per format, several of them large or
derived from valid files by cutting and flipping, are cheaper to keep as the code that makes them,
and the code says what each case means. Everything is deterministic (fixed seeds), so a failing
file has the same name and bytes on every run. Standard library only.
"""
import binascii
import gzip
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor

PARSERS = ["safetensors", "npy", "idx", "csv", "png", "events", "onnx"]
EXT = {"safetensors": ".safetensors", "npy": ".npy", "idx": ".idx", "csv": ".csv", "png": ".png",
       "events": ".tfevents", "onnx": ".onnx"}


class Out:
    def __init__(self, root):
        self.root = root
        self.count = {}
        for p in PARSERS + ["good"]:
            os.makedirs(os.path.join(root, p), exist_ok=True)
            for f in os.listdir(os.path.join(root, p)):
                path = os.path.join(root, p, f)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)  # a folder of external data and links (onnx/.ext)
                else:
                    os.unlink(path)

    def put(self, parser, name, data):
        ext = EXT[parser]
        if name.endswith(".gz"):
            ext = ""
        path = os.path.join(self.root, parser, name + ext)
        with open(path, "wb") as f:
            f.write(data)
        self.count[parser] = self.count.get(parser, 0) + 1

    def good(self, name, data):
        with open(os.path.join(self.root, "good", name), "wb") as f:
            f.write(data)


def cuts(data, n=60):
    """Cut points across a valid file: every byte of the first 64, then spread to the end."""
    pts = set(range(0, min(len(data), 64)))
    step = max(1, len(data) // n)
    pts.update(range(64, len(data), step))
    pts.discard(len(data))
    return sorted(pts)


def flips(data, rng, n, lo=0):
    """n copies of data, each with 1-4 bytes replaced by interesting values."""
    out = []
    special = [0x00, 0xff, 0x7f, 0x80, 0x01, 0xfe]
    for _ in range(n):
        d = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(lo, len(d))
            d[i] = rng.choice(special) if rng.random() < 0.5 else rng.randrange(256)
        out.append(bytes(d))
    return out


# ---- safetensors ----

def st_file(header, data=b"", raw_header=None):
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def gen_safetensors(o, rng):
    P = "safetensors"
    good_hdr = {"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                "b": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]},
                "__metadata__": {"format": "pt"}}
    good = st_file(good_hdr, bytes(range(40)))
    o.good("small.safetensors", good)
    # the CLI's mlp: Sequential(flatten, linear(784, 128), relu, linear(128, 10)), zero weights
    mlp = {}
    off = 0
    blobs = []
    for k, shape in [("1.weight", [128, 784]), ("1.bias", [128]), ("3.weight", [10, 128]), ("3.bias", [10])]:
        n = 4
        for s in shape:
            n *= s
        mlp[k] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + n]}
        off += n
        blobs.append(bytes(n))
    mlp_file = st_file(mlp, b"".join(blobs))
    o.good("mlp.safetensors", mlp_file)

    for i, c in enumerate(cuts(good)):
        o.put(P, "cut_%03d" % i, good[:c])
    for i, c in enumerate(cuts(mlp_file, 30)):
        o.put(P, "mlp_cut_%03d" % i, mlp_file[:c])
    for i, d in enumerate(flips(good, rng, 80)):
        o.put(P, "flip_%03d" % i, d)
    for i, d in enumerate(flips(mlp_file[:8 + len(json.dumps(mlp))], rng, 40, 8)):
        o.put(P, "mlp_hdrflip_%03d" % i, d + mlp_file[len(d):])
    # header length: past the end, huge, zero, around 2^63 and 2^64
    for i, n in enumerate([0, 1, 7, len(good), 1 << 20, 1 << 31, (1 << 32) + 2, (1 << 63) - 1, 1 << 63,
                           (1 << 64) - 1, (1 << 64) - 8]):
        o.put(P, "hdrlen_%02d" % i, struct.pack("<Q", n) + good[8:])
    o.put(P, "empty", b"")
    o.put(P, "seven_bytes", b"\x05\0\0\0\0\0\0")
    bad_headers = [
        b"", b"{", b"}", b"[]", b"null", b"42", b'"str"', b"{}", b"{,}", b'{"a":}', b'{"a"}',
        b'{"a": 1}', b'{"a": []}', b'{"a": null}', b'{"a": "x"}', b'{"a": {}}',
        b'{"a": {"dtype": "F32"}}', b'{"a": {"dtype": "F32", "shape": [1]}}',
        b'{"a": {"shape": [1], "data_offsets": [0, 4]}}',
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}',
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}}',
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": "0,4"}}',
        b'{"a": {"dtype": "F32", "shape": "[1]", "data_offsets": [0, 4]}}',
        b'{"a": {"dtype": 5, "shape": [1], "data_offsets": [0, 4]}}',
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}',
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}}',
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}} trailing',
        b'{"a\\u0000b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
        b'{"a\\ud800": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
        b'{"a\\uZZZZ": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
        b'{"a\\": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
        b'{"\xff\xfe": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
        b'{"": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
        b'{"__metadata__": 5}', b'{"__metadata__": {"k": 5}}', b'{"__metadata__": {"k": {"x": 1}}}',
        b'{"__metadata__": {"k": "v", "k": "w"}}', b'{"__metadata__": []}',
        b"\0" * 64, b"{" + b" " * 100000 + b"}", b"\xef\xbb\xbf{}",
    ]
    for i, h in enumerate(bad_headers):
        o.put(P, "hdr_%02d" % i, st_file(None, b"\0" * 16, raw_header=h))

    def one(dtype="F32", shape=(1,), offs=(0, 4), data=4, extra=None):
        t = {"dtype": dtype, "shape": list(shape) if isinstance(shape, (list, tuple)) else shape,
             "data_offsets": list(offs) if isinstance(offs, (list, tuple)) else offs}
        if extra:
            t.update(extra)
        return st_file({"t": t}, b"\x01" * data)

    cases = {
        "dtype_unknown": one(dtype="F31"), "dtype_empty": one(dtype=""), "dtype_lower": one(dtype="f32"),
        "dtype_c64": one(dtype="C64", offs=(0, 8), data=8), "dtype_f8": one(dtype="F8_E4M3", offs=(0, 1), data=1),
        "dtype_bool": one(dtype="BOOL", offs=(0, 1), data=1), "dtype_u64": one(dtype="U64", offs=(0, 8), data=8),
        "dtype_long": one(dtype="F" * 5000),
        "shape_neg": one(shape=(-1,)), "shape_neg2": one(shape=(-2, -2)), "shape_zero": one(shape=(0,), offs=(0, 0), data=0),
        "shape_zero_data": one(shape=(0, 5)), "shape_float": one(shape=(1.5,)), "shape_str": one(shape=("1",)),
        "shape_nested": one(shape=[[1]]), "shape_null": one(shape=[None]), "shape_bool": one(shape=[True]),
        "shape_huge": one(shape=(1 << 40,)), "shape_2p62": one(shape=(1 << 62,)),
        "shape_2p63": one(shape=(1 << 63,)), "shape_2p64": one(shape=(1 << 64,)),
        "shape_1e30": one(shape=(10 ** 30,)), "shape_overflow": one(shape=(1 << 32, 1 << 32, 1 << 32)),
        "shape_overflow2": one(shape=(1 << 31, 1 << 31, 4)), "shape_overflow_zero": one(shape=(1 << 62, 1 << 62, 0), offs=(0, 0), data=0),
        "shape_ndim_9": one(shape=[1] * 9), "shape_ndim_64": one(shape=[1] * 64), "shape_ndim_1000": one(shape=[1] * 1000),
        "shape_exp": st_file(None, b"\0" * 4, raw_header=b'{"t": {"dtype": "F32", "shape": [1e0], "data_offsets": [0, 4]}}'),
        "shape_bigexp": st_file(None, b"\0" * 4, raw_header=b'{"t": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 4]}}'),
        "shape_digits": st_file(None, b"\0" * 4, raw_header=b'{"t": {"dtype": "F32", "shape": [' + b"9" * 400 + b'], "data_offsets": [0, 4]}}'),
        "offs_reversed": one(offs=(4, 0)), "offs_past_end": one(offs=(0, 400)), "offs_start_past": one(offs=(100, 104)),
        "offs_neg": one(offs=(-4, 0)), "offs_neg2": one(offs=(0, -4)), "offs_huge": one(offs=(0, 1 << 63)),
        "offs_2p64": one(offs=((1 << 64) - 4, 1 << 64)), "offs_wrap": one(offs=((1 << 64) - 4, 0)),
        "offs_float": one(offs=(0.0, 4.0)), "offs_short": one(offs=(0, 2)), "offs_long": one(offs=(0, 8), data=8),
        "offs_gap": one(offs=(4, 8), data=8), "offs_size_mismatch": one(shape=(3,), offs=(0, 4)),
        "offs_unaligned": one(dtype="F64", offs=(1, 9), data=9),
        "extra_key": one(extra={"junk": [1, 2, {"x": None}]}),
        "overlap": st_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12),
        "same_range": st_file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                               "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4),
        "many_tensors": st_file({"t%d" % i: {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]} for i in range(20000)},
                                b"\0" * 20000),
        "long_name": st_file({"n" * 100000: {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\0"),
        "deep_array": st_file(None, b"", raw_header=b'{"t": ' + b"[" * 100000 + b"]" * 100000 + b"}"),
        "deep_object": st_file(None, b"", raw_header=b'{"t": ' + b'{"a":' * 50000 + b"1" + b"}" * 50000 + b"}"),
        "deep_metadata": st_file(None, b"", raw_header=b'{"__metadata__": ' + b"[" * 100000 + b"]" * 100000 + b"}"),
        "deep_unclosed": st_file(None, b"", raw_header=b'{"t": ' + b"[" * 200000),
        "mlp_wrong_shape": st_file({"1.weight": {"dtype": "F32", "shape": [784, 128], "data_offsets": [0, 401408]},
                                    "1.bias": {"dtype": "F32", "shape": [128], "data_offsets": [401408, 401920]},
                                    "3.weight": {"dtype": "F32", "shape": [10, 128], "data_offsets": [401920, 407040]},
                                    "3.bias": {"dtype": "F32", "shape": [10], "data_offsets": [407040, 407080]}},
                                   bytes(407080)),
        "mlp_f16": st_file({k: dict(v, dtype="F16", data_offsets=[v["data_offsets"][0] // 2, v["data_offsets"][1] // 2])
                            for k, v in mlp.items()}, bytes(off // 2)),
        "mlp_i8_dtype": st_file({k: dict(v, dtype="I8", data_offsets=[v["data_offsets"][0] // 4, v["data_offsets"][1] // 4])
                                 for k, v in mlp.items()}, bytes(off // 4)),
        "mlp_missing": st_file({"1.weight": mlp["1.weight"]}, blobs[0]),
        "mlp_data_short": mlp_file[:-1],
    }
    for name, data in cases.items():
        o.put(P, name, data)
    # random well-formed JSON headers with random fields
    dtypes = ["F32", "F64", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", "U32", "X"]
    for i in range(80):
        hdr = {}
        for k in range(rng.randint(1, 4)):
            shape = [rng.choice([0, 1, 2, 3, -1, 1 << 31, 1 << 62, 7]) for _ in range(rng.randint(0, 5))]
            a = rng.choice([0, 1, 4, 8, 100, -1, 1 << 63])
            b = rng.choice([0, 4, 8, 16, 64, 1 << 40, a + 4])
            hdr["t%d" % k] = {"dtype": rng.choice(dtypes), "shape": shape, "data_offsets": [a, b]}
        o.put(P, "rand_%03d" % i, st_file(hdr, b"\x3f" * rng.choice([0, 4, 16, 64, 128])))


# ---- NPY ----

def npy_file(header, data=b"", version=(1, 0), raw=None, pad=True):
    h = raw if raw is not None else header.encode("latin1")
    if pad:
        hl = 10 if version[0] == 1 else 12
        total = hl + len(h) + 1
        h = h + b" " * ((64 - total % 64) % 64) + b"\n"
    if version[0] == 1:
        pre = b"\x93NUMPY" + bytes(version) + struct.pack("<H", len(h))
    else:
        pre = b"\x93NUMPY" + bytes(version) + struct.pack("<I", len(h))
    return pre + h + data


def gen_npy(o, rng):
    P = "npy"
    good = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", struct.pack("<6f", *range(6)))
    o.good("x.npy", good)
    o.good("y.npy", npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", struct.pack("<2q", 0, 1)))
    for i, c in enumerate(cuts(good)):
        o.put(P, "cut_%03d" % i, good[:c])
    for i, d in enumerate(flips(good, rng, 100)):
        o.put(P, "flip_%03d" % i, d)
    for i, d in enumerate(flips(good, rng, 60, 10)):
        o.put(P, "hdrflip_%03d" % i, d)
    o.put(P, "empty", b"")
    o.put(P, "magic_only", b"\x93NUMPY")
    o.put(P, "bad_magic", b"\x93NUMPZ" + good[6:])
    for v in [(0, 0), (4, 0), (255, 255), (2, 0), (3, 0)]:
        o.put(P, "version_%d_%d" % v, good[:6] + bytes(v) + good[8:])
    for i, n in enumerate([0, 1, 0xffff, len(good)]):
        o.put(P, "hlen16_%d" % i, good[:8] + struct.pack("<H", n) + good[10:])
    for i, n in enumerate([0, 0xffffffff, 0x7fffffff, 1 << 20]):
        o.put(P, "hlen32_%d" % i, b"\x93NUMPY\x02\x00" + struct.pack("<I", n) + good[10:])
    D = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }"
    data = b"\x01" * 64
    headers = {
        "descr_c16": D % ("<c16", "False", "(2,)"), "descr_obj": D % ("|O", "False", "(2,)"),
        "descr_str": D % ("<U5", "False", "(2,)"), "descr_bytes": D % ("|S3", "False", "(2,)"),
        "descr_be": D % (">f4", "False", "(2,)"), "descr_f2": D % ("<f2", "False", "(2,)"),
        "descr_b1": D % ("|b1", "False", "(2,)"), "descr_u8": D % ("<u8", "False", "(2,)"),
        "descr_empty": D % ("", "False", "(2,)"), "descr_f0": D % ("<f0", "False", "(2,)"),
        "descr_f99": D % ("<f99", "False", "(2,)"), "descr_long": D % ("<" + "f" * 3000, "False", "(2,)"),
        "descr_struct": "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
        "descr_num": "{'descr': 4, 'fortran_order': False, 'shape': (2,), }",
        "fortran_str": D % ("<f4", "'yes'", "(2,)"), "fortran_1": D % ("<f4", "1", "(2,)"),
        "fortran_true3d": D % ("<f4", "True", "(2, 2, 2)"),
        "shape_neg": D % ("<f4", "False", "(-1,)"), "shape_neg2": D % ("<f4", "False", "(2, -3)"),
        "shape_huge": D % ("<f4", "False", "(%d,)" % (1 << 62)), "shape_2p63": D % ("<f4", "False", "(%d,)" % (1 << 63)),
        "shape_2p64": D % ("<f4", "False", "(%d,)" % (1 << 64)), "shape_digits": D % ("<f4", "False", "(%s,)" % ("9" * 400)),
        "shape_overflow": D % ("<f4", "False", "(%d, %d, %d)" % (1 << 32, 1 << 32, 1 << 32)),
        "shape_overflow_f8": D % ("<f8", "False", "(%d, %d)" % (1 << 31, 1 << 31)),
        "shape_overflow_zero": D % ("<f4", "False", "(%d, %d, 0)" % (1 << 62, 1 << 62)),
        "shape_zero": D % ("<f4", "False", "(0,)"), "shape_scalar": D % ("<f4", "False", "()"),
        "shape_ndim_9": D % ("<f4", "False", "(" + "1, " * 9 + ")"),
        "shape_ndim_64": D % ("<f4", "False", "(" + "1, " * 64 + ")"),
        "shape_ndim_10000": D % ("<f4", "False", "(" + "1, " * 10000 + ")"),
        "shape_float": D % ("<f4", "False", "(2.5,)"), "shape_list": D % ("<f4", "False", "[2]"),
        "shape_unclosed": D % ("<f4", "False", "(2,"), "shape_nested": D % ("<f4", "False", "((2,),)"),
        "shape_str": D % ("<f4", "False", "('2',)"), "shape_plus": D % ("<f4", "False", "(+2,)"),
        "shape_hex": D % ("<f4", "False", "(0x2,)"), "shape_none": D % ("<f4", "False", "None"),
        "missing_shape": "{'descr': '<f4', 'fortran_order': False, }",
        "missing_descr": "{'fortran_order': False, 'shape': (2,), }",
        "missing_fortran": "{'descr': '<f4', 'shape': (2,), }",
        "dup_key": "{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
        "extra_key": "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1, }",
        "not_dict": "[1, 2, 3]", "empty_dict": "{}", "empty_header": "", "unterminated_str": "{'descr': '<f4",
        "dq_keys": '{"descr": "<f4", "fortran_order": False, "shape": (2,), }',
        "nul_inside": "{'descr': '<f4\0', 'fortran_order': False, 'shape': (2,), }",
        "deep_parens": "{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 20000 + ")" * 20000 + ", }",
    }
    for name, h in headers.items():
        o.put(P, name, npy_file(h, data))
        o.put(P, name + "_v2", npy_file(h, data, version=(2, 0)))
    ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"
    o.put(P, "data_short", npy_file(ok, b"\0" * 15))
    o.put(P, "data_none", npy_file(ok, b""))
    o.put(P, "data_long", npy_file(ok, b"\0" * 17))
    o.put(P, "no_newline", npy_file(None, b"\0" * 16, raw=ok.encode(), pad=False))
    o.put(P, "unpadded", npy_file(None, b"\0" * 16, raw=ok.encode() + b"\n", pad=False))
    o.put(P, "v1_utf8", npy_file(None, b"\0" * 16, raw="{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'é': 1}\n".encode()))
    o.put(P, "v3_utf8", npy_file(None, b"\0" * 16, version=(3, 0), raw=b"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\xff\n"))
    for i in range(60):
        dims = ", ".join(str(rng.choice([0, 1, 2, 3, -1, 1 << 31, 1 << 40, 1 << 62])) for _ in range(rng.randint(0, 6)))
        h = D % (rng.choice(["<f4", "<f8", "|u1", "<i8", "<i4", "|b1", "<f2", ">i4", "<i2"]),
                 rng.choice(["False", "True"]), "(" + dims + ("," if dims.count(",") == 0 and dims else "") + ")")
        o.put(P, "rand_%03d" % i, npy_file(h, b"\x02" * rng.choice([0, 1, 8, 64, 256])))


# ---- IDX ----

def idx_file(dtype, dims, data=b""):
    return bytes([0, 0, dtype, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data


def gen_idx(o, rng):
    P = "idx"
    images = idx_file(0x08, [3, 28, 28], bytes(i % 251 for i in range(3 * 784)))  # what the CLI's models take
    labels = idx_file(0x08, [3], bytes([0, 1, 2]))
    o.good("images.idx", images)
    o.good("labels.idx", labels)
    o.good("images.idx.gz", gzip.compress(images, mtime=0))
    # the case the issue names: 16 bytes claiming 2^20 x 2^20 x 2^25 bytes, with no data
    o.put(P, "huge_dims_no_data", idx_file(0x08, [1 << 20, 1 << 20, 1 << 25]))
    o.put(P, "huge_dims_no_data_gz.idx.gz", gzip.compress(idx_file(0x08, [1 << 20, 1 << 20, 1 << 25]), mtime=0))
    for i, c in enumerate(cuts(images)):
        o.put(P, "cut_%03d" % i, images[:c])
    for i, c in enumerate(cuts(labels)):
        o.put(P, "labels_cut_%03d" % i, labels[:c])
    for i, d in enumerate(flips(images, rng, 80)):
        o.put(P, "flip_%03d" % i, d)
    for i, d in enumerate(flips(images[:16], rng, 40)):
        o.put(P, "hdrflip_%03d" % i, d + images[16:])
    o.put(P, "empty", b"")
    o.put(P, "bad_magic_1", b"\x01\0\x08\x01\0\0\0\x01\0")
    o.put(P, "bad_magic_2", b"\0\x01\x08\x01\0\0\0\x01\0")
    for t in [0x00, 0x07, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0xff]:
        o.put(P, "type_%02x" % t, idx_file(t, [2, 2], b"\0" * 32))
        o.put(P, "type_%02x_short" % t, idx_file(t, [2, 2], b"\0" * 3))
    for n in [0, 1, 2, 3, 4, 5, 8, 16, 32, 64, 255]:
        o.put(P, "ndim_%03d" % n, bytes([0, 0, 8, n]) + b"\0\0\0\x02" * min(n, 8) + b"\0" * 16)
        o.put(P, "ndim_%03d_full" % n, bytes([0, 0, 8, n]) + b"\0\0\0\x01" * n + b"\0" * 4)
    dims_cases = {
        "zero_dim": [0, 28, 28], "zero_all": [0, 0, 0], "max_u32": [0xffffffff], "max_u32_3": [0xffffffff] * 3,
        "2p31": [1 << 31], "2p31_2": [1 << 31, 1 << 31], "overflow64": [0xffffffff, 0xffffffff, 0xffffffff],
        "overflow_4d": [0xffffffff] * 4, "overflow_zero": [0xffffffff, 0xffffffff, 0xffffffff, 0],
        "one_big_zero": [0, 0xffffffff], "mnist_no_data": [60000, 28, 28], "rows_1": [1, 1, 1],
    }
    for name, dims in dims_cases.items():
        for t in [0x08, 0x0d, 0x0e]:
            o.put(P, "%s_t%02x" % (name, t), idx_file(t, dims, b"\0" * 8))
    o.put(P, "data_extra", idx_file(0x08, [2], b"\0" * 100))
    o.put(P, "f32_nan", idx_file(0x0d, [4], struct.pack(">4f", float("nan"), float("inf"), -float("inf"), 1e38)))
    # gzip: cut, corrupted, concatenated members, a decompression ratio bomb (64 MiB of zeros)
    gz = gzip.compress(images, mtime=0)
    for i, c in enumerate(cuts(gz, 30)):
        o.put(P, "gz_cut_%03d.idx.gz" % i, gz[:c])
    for i, d in enumerate(flips(gz, rng, 40, 10)):
        o.put(P, "gz_flip_%03d.idx.gz" % i, d)
    bad_crc = bytearray(gz)
    bad_crc[-8] ^= 0xff
    o.put(P, "gz_bad_crc.idx.gz", bytes(bad_crc))
    bad_len = bytearray(gz)
    bad_len[-1] ^= 0xff
    o.put(P, "gz_bad_isize.idx.gz", bytes(bad_len))
    o.put(P, "gz_two_members.idx.gz", gz + gz)
    o.put(P, "gz_trailing_junk.idx.gz", gz + b"junk")
    o.put(P, "gz_header_only.idx.gz", gz[:10])
    o.put(P, "gz_magic_only.idx.gz", b"\x1f\x8b")
    o.put(P, "gz_bomb.idx.gz", gzip.compress(idx_file(0x08, [1 << 14, 64, 64]) + bytes(1 << 26), compresslevel=9, mtime=0))
    o.put(P, "gz_huge_dims.idx.gz", gzip.compress(idx_file(0x08, [0xffffffff, 0xffffffff, 0xffffffff]), mtime=0))
    o.put(P, "gz_of_garbage.idx.gz", gzip.compress(bytes(rng.randrange(256) for _ in range(200)), mtime=0))
    # label files the dataset pairs with the good images: wrong count, wrong rank, wrong type
    o.put(P, "labels_count_2", idx_file(0x08, [2], b"\0\1"))
    o.put(P, "labels_count_4", idx_file(0x08, [4], b"\0\1\2\3"))
    o.put(P, "labels_2d", idx_file(0x08, [3, 1], b"\0\1\2"))
    o.put(P, "labels_f64", idx_file(0x0e, [3], struct.pack(">3d", 1e300, float("nan"), -1)))
    o.put(P, "labels_f32_big", idx_file(0x0d, [3], struct.pack(">3f", 3e38, float("inf"), -3e38)))
    o.put(P, "labels_i32_neg", idx_file(0x0c, [3], struct.pack(">3i", -1, -(1 << 31), (1 << 31) - 1)))
    o.put(P, "images_1d", idx_file(0x08, [3], b"\0\1\2"))
    o.put(P, "images_4d", idx_file(0x08, [3, 1, 2, 2], b"\0" * 12))
    for i in range(40):
        nd = rng.randint(0, 5)
        dims = [rng.choice([0, 1, 2, 3, 28, 0xffff, 1 << 16, 1 << 31, 0xffffffff]) for _ in range(nd)]
        o.put(P, "rand_%03d" % i, idx_file(rng.choice([0x08, 0x09, 0x0b, 0x0c, 0x0d, 0x0e, 0x10]), dims,
                                           b"\x05" * rng.choice([0, 1, 4, 64, 512])))


# ---- CSV ----

def gen_csv(o, rng):
    P = "csv"
    good = b"label,a,b,c\n0,1.5,2,3\n1,4,5,6.25\n2,-7,8e2,9\n"
    o.good("data.csv", good)
    cases = {
        "nul_field": b"label,a\n1\0 2,3\n", "nul_header": b"la\0bel,a\n1,2\n", "nul_only": b"\0",
        "nul_many": b"\0" * 1000, "nul_after_number": b"label,a\n1,2\0\n", "nul_quoted": b'label,a\n1,"2\0"\n',
        "empty": b"", "newline": b"\n", "newlines": b"\n" * 1000, "header_only": b"label,a,b\n",
        "header_no_newline": b"label,a,b", "one_column": b"label\n1\n2\n", "no_label_col": b"a,b\n1,2\n",
        "ragged_long": b"label,a\n1,2,3\n", "ragged_short": b"label,a,b\n1,2\n", "ragged_empty_row": b"label,a\n1,2\n\n3,4\n",
        "trailing_comma": b"label,a\n1,2,\n", "empty_fields": b"label,a\n,\n", "spaces": b"label,a\n 1 , 2 \n",
        "tabs": b"label\ta\n1\t2\n", "semicolon": b"label;a\n1;2\n",
        "cr_only": b"label,a\r1,2\r3,4\r", "crlf": b"label,a\r\n1,2\r\n", "lf_cr": b"label,a\n\r1,2\n\r",
        "bom": b"\xef\xbb\xbflabel,a\n1,2\n", "utf16": "label,a\n1,2\n".encode("utf-16"),
        "latin1": b"l\xe9bel,a\n1,2\n", "invalid_utf8": b"label,\xff\xfe\n1,2\n",
        "unterminated_quote": b'label,a\n1,"2\n', "quote_eof": b'label,a\n1,"', "quote_in_field": b'label,a\n1,2"3\n',
        "quote_after": b'label,a\n1,"2"3\n', "quoted_newline": b'label,a\n1,"2\n3"\n', "double_quote": b'label,a\n1,""""\n',
        "quoted_number": b'label,a\n"1","2"\n', "quote_only": b'"', "quotes": b'"' * 999,
        "nan": b"label,a\n1,nan\n", "inf": b"label,a\n1,inf\n", "neg_inf": b"label,a\n1,-inf\n",
        "huge_float": b"label,a\n1,1e999\n", "tiny_float": b"label,a\n1,1e-999\n", "hex": b"label,a\n1,0x10\n",
        "double_minus": b"label,a\n1,--1\n", "plus": b"label,a\n+1,+2\n", "dot": b"label,a\n1,.\n",
        "exp_only": b"label,a\n1,e5\n", "digits_500": b"label,a\n1," + b"9" * 500 + b"\n",
        "label_float": b"label,a\n1.5,2\n", "label_huge": b"label,a\n1e30,2\n", "label_2p63": b"label,a\n9223372036854775808,2\n",
        "label_neg_2p63": b"label,a\n-9223372036854775809,2\n", "label_nan": b"label,a\nnan,2\n", "label_inf": b"label,a\ninf,2\n",
        "label_neg": b"label,a\n-1,2\n", "label_text": b"label,a\ncat,2\n", "label_max_i64": b"label,a\n9223372036854775807,2\n",
        "label_1e19": b"label,a\n1e19,2\n", "label_neg_1e19": b"label,a\n-1e19,2\n", "label_9e18": b"label,a\n9.3e18,2\n",
        "long_line": b"label,a\n1," + b"1" * (1 << 20) + b"\n", "many_columns": b"label," + b",".join(b"c%d" % i for i in range(100000)) + b"\n" + b"1" + b",1" * 100000 + b"\n",
        "many_rows": b"label,a\n" + b"1,2\n" * 200000, "only_commas": b"," * 10000, "deep_quotes": b'"' + b'""' * 50000 + b'"',
        "comment": b"# comment\nlabel,a\n1,2\n", "dup_header": b"label,label\n1,2\n", "empty_header_name": b",\n1,2\n",
    }
    for name, data in cases.items():
        o.put(P, name, data)
    for i, c in enumerate(cuts(good)):
        o.put(P, "cut_%03d" % i, good[:c])
    for i, d in enumerate(flips(good, rng, 80)):
        o.put(P, "flip_%03d" % i, d)
    alphabet = b'0123456789.,-+e"\n\r\0 ;abnif'
    for i in range(80):
        o.put(P, "rand_%03d" % i, bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 120))))


# ---- PNG ----

def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", binascii.crc32(kind + data) & 0xffffffff)


def png_file(w, h, depth=8, color=0, interlace=0, raw=None, extra=b"", idat=None, ihdr=None):
    sig = b"\x89PNG\r\n\x1a\n"
    ch = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(color, 1)
    if raw is None:
        row = 1 + (w * ch * depth + 7) // 8
        raw = b"".join(b"\0" + bytes(row - 1) for _ in range(h)) if w * h < (1 << 22) else b""
    hdr = ihdr if ihdr is not None else struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, interlace)
    body = idat if idat is not None else zlib.compress(raw)
    return sig + png_chunk(b"IHDR", hdr) + extra + png_chunk(b"IDAT", body) + png_chunk(b"IEND", b"")


def gen_png(o, rng):
    P = "png"
    gray = png_file(4, 3)
    rgb = png_file(3, 2, color=2, raw=b"".join(b"\0" + bytes(range(9)) for _ in range(2)))
    o.good("gray.png", gray)
    for i, c in enumerate(cuts(gray)):
        o.put(P, "cut_%03d" % i, gray[:c])
    for i, c in enumerate(cuts(rgb, 30)):
        o.put(P, "rgb_cut_%03d" % i, rgb[:c])
    for i, d in enumerate(flips(gray, rng, 80, 8)):
        o.put(P, "flip_%03d" % i, d)
    o.put(P, "empty", b"")
    o.put(P, "sig_only", b"\x89PNG\r\n\x1a\n")
    o.put(P, "bad_sig", b"\x89PNX\r\n\x1a\n" + gray[8:])
    o.put(P, "no_iend", gray[:-12])
    o.put(P, "no_idat", b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 0, 0, 0, 0)) + png_chunk(b"IEND", b""))
    for w, h in [(0, 1), (1, 0), (0, 0), (1 << 31, 1), (1, 1 << 31), (0xffffffff, 0xffffffff), (1 << 20, 1 << 20),
                 (1000000, 1000000), (65536, 65536), (1 << 30, 4), (100000, 1)]:
        for color in [0, 6]:
            o.put(P, "dims_%dx%d_c%d" % (w, h, color), png_file(w, h, color=color, idat=zlib.compress(b"\0" * 64)))
    for depth in [0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 32, 255]:
        for color in [0, 1, 2, 3, 4, 5, 6, 7]:
            o.put(P, "depth_%d_color_%d" % (depth, color), png_file(2, 2, depth=depth, color=color,
                                                                      idat=zlib.compress(b"\0" * 80)))
    o.put(P, "interlaced", png_file(4, 4, interlace=1, idat=zlib.compress(b"\0" * 40)))
    o.put(P, "interlace_2", png_file(4, 4, interlace=2))
    o.put(P, "palette_no_plte", png_file(2, 2, color=3))
    o.put(P, "palette_short_plte", png_file(2, 2, color=3, raw=b"\0\x05\x09\0\x07\x08", extra=png_chunk(b"PLTE", b"\0\0\0")))
    o.put(P, "plte_huge", png_file(2, 2, color=3, extra=png_chunk(b"PLTE", b"\0" * 3000)))
    o.put(P, "plte_not_mult3", png_file(2, 2, color=3, extra=png_chunk(b"PLTE", b"\0" * 4)))
    o.put(P, "trns_gray", png_file(2, 2, extra=png_chunk(b"tRNS", b"\0\0" * 10)))
    o.put(P, "ihdr_short", png_file(2, 2, ihdr=b"\0\0\0\x02"))
    o.put(P, "ihdr_long", png_file(2, 2, ihdr=struct.pack(">IIBBBBB", 2, 2, 8, 0, 0, 0, 0) + b"\0" * 20))
    o.put(P, "idat_garbage", png_file(4, 3, idat=b"garbage!" * 4))
    o.put(P, "idat_empty", png_file(4, 3, idat=b""))
    o.put(P, "idat_short", png_file(4, 3, raw=b"\0" * 5))
    o.put(P, "idat_long", png_file(4, 3, raw=b"\0" * 5000))
    o.put(P, "idat_bad_filter", png_file(4, 3, raw=b"\x09\0\0\0\0" * 3))
    o.put(P, "idat_bomb", png_file(8192, 8192, raw=bytes(8193 * 8192)))
    big = bytearray(gray)
    big[8:12] = struct.pack(">I", 0x7fffffff)
    o.put(P, "chunk_len_huge", bytes(big))
    big[8:12] = struct.pack(">I", 0xffffffff)
    o.put(P, "chunk_len_max", bytes(big))
    crc = bytearray(gray)
    crc[29] ^= 0xff
    o.put(P, "ihdr_bad_crc", bytes(crc))
    o.put(P, "unknown_critical", png_file(2, 2, extra=png_chunk(b"ABCD", b"x")))
    o.put(P, "many_chunks", png_file(2, 2, extra=png_chunk(b"tEXt", b"k\0v") * 20000))
    o.put(P, "huge_text", png_file(2, 2, extra=png_chunk(b"zTXt", b"k\0\0" + zlib.compress(bytes(1 << 24)))))
    o.put(P, "iccp_bomb", png_file(2, 2, extra=png_chunk(b"iCCP", b"p\0\0" + zlib.compress(bytes(1 << 24)))))
    o.put(P, "two_ihdr", png_file(2, 2, extra=png_chunk(b"IHDR", struct.pack(">IIBBBBB", 9999, 9999, 8, 0, 0, 0, 0))))
    o.put(P, "png16_rgba", png_file(2, 2, depth=16, color=6))
    for i in range(40):
        w, h = rng.choice([1, 2, 3, 17, 1 << 16]), rng.choice([1, 2, 5, 1 << 15])
        o.put(P, "rand_%03d" % i, png_file(w, h, depth=rng.choice([1, 2, 4, 8, 16]), color=rng.choice([0, 2, 3, 4, 6]),
                                            idat=zlib.compress(bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))))))


# ---- TensorBoard event files ----

def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xffffffff) + 0xa282ead8) & 0xffffffff


def record(data, length=None, bad_len_crc=False, bad_data_crc=False):
    n = len(data) if length is None else length
    head = struct.pack("<Q", n & 0xffffffffffffffff)
    lc = masked(crc32c(head)) ^ (1 if bad_len_crc else 0)
    dc = masked(crc32c(data)) ^ (1 if bad_data_crc else 0)
    return head + struct.pack("<I", lc) + data + struct.pack("<I", dc)


def varint(v):
    v &= 0xffffffffffffffff
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def ld(field, data):
    return key(field, 2) + varint(len(data)) + data


def event(wall=1.5, step=1, summary=None, extra=b""):
    e = key(1, 1) + struct.pack("<d", wall) + key(2, 0) + varint(step) + extra
    if summary is not None:
        e += ld(5, summary)
    return e


def scalar_value(tag, v):
    return ld(1, ld(1, tag) + key(2, 5) + struct.pack("<f", v))


def tensor_value(tag, dtype, content=None, float_val=None, double_val=None, plugin=b"scalars"):
    t = key(1, 0) + varint(dtype)
    if content is not None:
        t += ld(4, content)
    if float_val is not None:
        t += key(5, 5) + struct.pack("<f", float_val)
    if double_val is not None:
        t += key(6, 1) + struct.pack("<d", double_val)
    meta = ld(1, ld(1, plugin))
    return ld(1, ld(1, tag) + ld(8, t) + ld(9, meta))


def gen_events(o, rng):
    P = "events"
    version = record(event(summary=None, extra=ld(3, b"brain.Event:2")))
    recs = [version] + [record(event(step=i, summary=scalar_value(b"loss", 1.0 / (i + 1)))) for i in range(5)]
    recs.append(record(event(step=9, summary=tensor_value(b"acc", 1, content=struct.pack("<f", 0.5)))))
    good = b"".join(recs)
    o.good("events.out.tfevents.good", good)
    for i, c in enumerate(cuts(good, 80)):
        o.put(P, "cut_%03d" % i, good[:c])
    for i, d in enumerate(flips(good, rng, 60)):
        o.put(P, "flip_%03d" % i, d)
    o.put(P, "empty", b"")
    for n in [0, 1, 11, 12, 15]:
        o.put(P, "short_%02d" % n, good[:n] if n else b"\0")
    # lengths: past the end, huge, 2^63, 2^64-1, 2^64-16 (a wrap when 16 is added), with valid CRCs
    for i, n in enumerate([100, 1 << 31, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, (1 << 64) - 16,
                           (1 << 64) - 12, (1 << 64) - 4]):
        o.put(P, "len_%02d" % i, version + record(b"abcd", length=n))
    o.put(P, "bad_len_crc", version + record(event(), bad_len_crc=True))
    o.put(P, "bad_data_crc", version + record(event(), bad_data_crc=True))
    # well-framed records holding malformed protobuf
    bodies = {
        "pb_empty": b"", "pb_garbage": bytes(range(256)), "pb_field0": b"\x00\x01", "pb_wire3": b"\x0b",
        "pb_wire7": b"\x0f", "pb_varint_11": b"\x10" + b"\xff" * 11, "pb_varint_cut": b"\x10\xff",
        "pb_fixed64_cut": b"\x09\x00\x00", "pb_fixed32_cut": b"\x0d\x00", "pb_len_past": b"\x2a\x7f",
        "pb_len_huge": b"\x2a" + varint(1 << 63), "pb_len_max": b"\x2a" + varint((1 << 64) - 1),
        "pb_key_huge": varint((1 << 64) - 1) + b"\0", "pb_field_2p32": varint((1 << 35) | 2) + b"\0",
        "summary_garbage": event(summary=b"\xff\xff\xff"), "summary_value_garbage": event(summary=ld(1, b"\x0a\x7f")),
        "value_no_tag": event(summary=ld(1, key(2, 5) + struct.pack("<f", 1))),
        "value_empty_tag": event(summary=scalar_value(b"", 1.0)), "value_nul_tag": event(summary=scalar_value(b"a\0b", 1.0)),
        "value_nul_only_tag": event(summary=scalar_value(b"\0", 1.0)),
        "value_utf8_bad_tag": event(summary=scalar_value(b"\xff\xfe", 1.0)),
        "value_long_tag": event(summary=scalar_value(b"t" * 100000, 1.0)),
        "value_nan": event(summary=scalar_value(b"x", float("nan"))), "value_inf": event(summary=scalar_value(b"x", float("inf"))),
        "step_neg": event(step=-1, summary=scalar_value(b"x", 1)), "step_max": event(step=(1 << 64) - 1, summary=scalar_value(b"x", 1)),
        "step_2p63": event(step=1 << 63, summary=scalar_value(b"x", 1)),
        "wall_nan": event(wall=float("nan"), summary=scalar_value(b"x", 1)),
        "wall_inf": event(wall=float("-inf"), summary=scalar_value(b"x", 1)),
        "tensor_dtype_0": event(summary=tensor_value(b"t", 0, content=b"\0\0\0\0")),
        "tensor_dtype_99": event(summary=tensor_value(b"t", 99, content=b"\0" * 8)),
        "tensor_dtype_neg": event(summary=tensor_value(b"t", -1, content=b"\0" * 8)),
        "tensor_content_short": event(summary=tensor_value(b"t", 1, content=b"\0")),
        "tensor_content_long": event(summary=tensor_value(b"t", 2, content=b"\0" * 100)),
        "tensor_double": event(summary=tensor_value(b"t", 2, double_val=2.5)),
        "tensor_float_val": event(summary=tensor_value(b"t", 1, float_val=2.5)),
        "tensor_no_value": event(summary=tensor_value(b"t", 1)),
        "tensor_other_plugin": event(summary=tensor_value(b"t", 1, content=b"\0" * 4, plugin=b"histograms")),
        "tensor_packed_short": event(summary=ld(1, ld(1, b"t") + ld(8, key(1, 0) + b"\x01" + ld(5, b"\0\0")) + ld(9, ld(1, ld(1, b"scalars"))))),
        "tensor_packed_double_short": event(summary=ld(1, ld(1, b"t") + ld(8, key(1, 0) + b"\x02" + ld(6, b"\0" * 7)) + ld(9, ld(1, ld(1, b"scalars"))))),
        "tensor_garbage": event(summary=ld(1, ld(1, b"t") + ld(8, b"\xff\xff") + ld(9, ld(1, ld(1, b"scalars"))))),
        "metadata_garbage": event(summary=ld(1, ld(1, b"t") + ld(8, b"") + ld(9, b"\x0a\x7f"))),
        "many_values": event(summary=b"".join(scalar_value(b"v%d" % i, i) for i in range(3000))),
        "many_same_values": event(summary=scalar_value(b"x", 1) * 20000),
    }
    for name, body in bodies.items():
        o.put(P, name, version + record(body))
    o.put(P, "many_records", version + b"".join(record(event(step=i, summary=scalar_value(b"x", i))) for i in range(50000)))
    o.put(P, "many_tags", version + b"".join(record(event(step=i, summary=scalar_value(b"tag%d" % i, i))) for i in range(5000)))
    o.put(P, "good_then_garbage", good + b"\x07" * 100)
    o.put(P, "zeros", bytes(4096))
    o.put(P, "ones", b"\xff" * 4096)
    # random protobuf-ish bodies in valid frames
    for i in range(60):
        parts = []
        for _ in range(rng.randint(1, 6)):
            f = rng.choice([1, 2, 3, 5, 8, 9, 100])
            w = rng.choice([0, 1, 2, 5])
            if w == 0:
                parts.append(key(f, 0) + varint(rng.choice([0, 1, 2, (1 << 63), (1 << 64) - 1])))
            elif w == 1:
                parts.append(key(f, 1) + struct.pack("<d", rng.choice([0.0, float("nan"), 1e308])))
            elif w == 5:
                parts.append(key(f, 5) + struct.pack("<f", rng.choice([0.0, float("inf"), -1.0])))
            else:
                parts.append(ld(f, rng.choice([b"", scalar_value(b"r", 1), b"\x0a\x05abc", bytes(rng.randrange(256) for _ in range(20))])))
        o.put(P, "rand_%03d" % i, version + record(b"".join(parts)))


# ---- ONNX (protobuf written field by field: standard library only) ----

F32, I32, I64, U8 = 1, 6, 7, 2  # TensorProto.DataType
A_FLOAT, A_INT, A_STRING, A_TENSOR, A_GRAPH, A_FLOATS, A_INTS = 1, 2, 3, 4, 5, 6, 7  # AttributeType


def onnx_model(graph, opset=13, extra=b""):
    return key(1, 0) + varint(8) + ld(8, key(2, 0) + varint(opset)) + ld(7, graph) + extra


def onnx_graph(nodes=(), inputs=(), outputs=(), inits=(), name=b"g"):
    return (b"".join(ld(1, n) for n in nodes) + ld(2, name) + b"".join(ld(5, t) for t in inits) +
            b"".join(ld(11, v) for v in inputs) + b"".join(ld(12, v) for v in outputs))


def onnx_node(op, ins, outs, attrs=(), name=b"n"):
    return (b"".join(ld(1, i) for i in ins) + b"".join(ld(2, o) for o in outs) + ld(3, name) + ld(4, op) +
            b"".join(ld(5, a) for a in attrs))


def attr(name, atype=None, i=None, f=None, s=None, ints=None, t=None, g=None, tp=None):
    a = ld(1, name)
    if atype is not None:
        a += key(20, 0) + varint(atype)
    if f is not None:
        a += key(2, 5) + struct.pack("<f", f)
    if i is not None:
        a += key(3, 0) + varint(i)
    if s is not None:
        a += ld(4, s)
    if t is not None:
        a += ld(5, t)
    if g is not None:
        a += ld(6, g)
    for v in ints or ():
        a += key(8, 0) + varint(v)
    if tp is not None:
        a += ld(14, tp)
    return a


def tensor(name, dtype, dims, raw=None, location=None):
    t = b"".join(key(1, 0) + varint(d) for d in dims) + key(2, 0) + varint(dtype) + ld(8, name)
    if raw is not None:
        t += ld(9, raw)
    if location is not None:
        t += ld(13, ld(1, b"location") + ld(2, location)) + key(14, 0) + varint(1)
    return t


def tensor_type(elem, dims=None):
    body = key(1, 0) + varint(elem)
    if dims is not None:
        body += ld(2, b"".join(ld(1, ld(2, d) if isinstance(d, bytes) else key(1, 0) + varint(d)) for d in dims))
    return ld(1, body)


def value_info(name, elem=F32, dims=(b"N", 2), type_proto=None):
    return ld(1, name) + ld(2, type_proto if type_proto is not None else tensor_type(elem, dims))


def i64s(*v):
    return struct.pack("<%dq" % len(v), *v)


def gen_onnx(o, rng):
    P = "onnx"
    x, y = value_info(b"x"), value_info(b"y", dims=None)
    b = tensor(b"b", F32, [2], struct.pack("<2f", 1.0, -2.0))
    good = onnx_model(onnx_graph([onnx_node(b"Add", [b"x", b"b"], [b"s"], name=b"add"),
                                  onnx_node(b"Relu", [b"s"], [b"y"], name=b"relu")], [x], [y], [b]))
    o.good("model.onnx", good)
    o.good("x22.npy", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", struct.pack("<4f", 1, -1, 2, -3)))
    for i, c in enumerate(cuts(good, 40)):
        o.put(P, "cut_%03d" % i, good[:c])
    for i, d in enumerate(flips(good, rng, 40)):
        o.put(P, "flip_%03d" % i, d)
    o.put(P, "empty", b"")

    def one(nodes, inputs=(x,), inits=(), opset=13, extra=b""):
        return onnx_model(onnx_graph(nodes, inputs, [y], inits), opset, extra)

    # nesting: protobuf-c unpacks by recursion; past 100 levels below the model it is refused
    def nested_graph(depth, field=6, atype=A_GRAPH):
        g = onnx_graph([onnx_node(b"Relu", [b"x"], [b"y"])], name=b"inner")
        for _ in range(depth):
            a = ld(1, b"body") + key(20, 0) + varint(atype) + ld(field, g)
            g = onnx_graph([onnx_node(b"If", [b"c"], [b"y"], [a])])
        return g

    def nested_type(depth, kind):
        t = tensor_type(F32, [2])
        for _ in range(depth):
            if kind == "sequence":
                t = ld(4, ld(1, t))
            elif kind == "map":
                t = ld(5, key(1, 0) + varint(I64) + ld(2, t))
            else:
                t = ld(9, ld(1, t))
        return t

    for d in [1, 10, 33, 34, 100, 1000, 3000, 20000]:
        o.put(P, "nest_graph_%05d" % d, onnx_model(nested_graph(d)))
    for d in [33, 34, 3000]:
        o.put(P, "nest_graphs_%05d" % d, onnx_model(nested_graph(d, field=11, atype=10)))  # AttributeProto.graphs
    for kind in ["sequence", "map", "optional"]:
        for d in [48, 49, 1000, 20000]:
            o.put(P, "nest_type_%s_%05d" % (kind, d), onnx_model(onnx_graph([onnx_node(b"Relu", [b"x"], [b"y"])],
                                                                            [value_info(b"x", type_proto=nested_type(d, kind))], [y])))
            # the same types in an attribute's TypeProto (tp) and a graph's value_info
            o.put(P, "nest_tp_%s_%05d" % (kind, d), one([onnx_node(b"Relu", [b"x"], [b"y"], [attr(b"t", 13, tp=nested_type(d, kind))])]))
    for d in [34, 3000]:
        deep = nested_graph(d)
        o.put(P, "nest_function_%05d" % d, onnx_model(onnx_graph([], [x], [y]),
                                                       extra=ld(25, ld(1, b"f") + ld(7, onnx_node(b"If", [b"c"], [b"y"], [attr(b"g", A_GRAPH, g=deep)])))))
        o.put(P, "nest_training_%05d" % d, onnx_model(onnx_graph([], [x], [y]), extra=ld(20, ld(1, deep))))
    mixed = onnx_graph(inputs=[value_info(b"v", type_proto=nested_type(40, "sequence"))])
    for _ in range(30):  # 30 graphs deep, then 40 types: 90 + 85 levels
        mixed = onnx_graph([onnx_node(b"If", [b"c"], [b"y"], [attr(b"body", A_GRAPH, g=mixed)])])
    o.put(P, "nest_mixed", onnx_model(mixed))
    o.put(P, "nest_cut", onnx_model(nested_graph(3000))[:30000])

    # integer Div and Mod: division by zero (folded at load from initializers, or at run from
    # the input cast to integers: x is all zeros in the harness), INT_MIN / -1, types that differ
    xi = onnx_node(b"Cast", [b"x"], [b"xi"], [attr(b"to", A_INT, i=I64)], name=b"cast")
    c = tensor(b"c", I64, [2], i64s(-(1 << 63), 7))
    for op, fmod in [(b"Div", None), (b"Mod", 0), (b"Mod", 1)]:
        at = [] if fmod is None else [attr(b"fmod", A_INT, i=fmod)]
        tag = op.decode().lower() + ("" if fmod is None else str(fmod))
        o.put(P, "int_%s_by_input" % tag, one([xi, onnx_node(op, [b"c", b"xi"], [b"q"], at), onnx_node(b"Cast", [b"q"], [b"y"], [attr(b"to", A_INT, i=F32)])], inits=[c]))
        for dt, name, raw0, rawm1, n in [(I64, "i64", i64s(0), i64s(-1), 8), (I32, "i32", struct.pack("<i", 0), struct.pack("<i", -1), 4),
                                         (U8, "u8", b"\0", b"\xff", 1)]:
            a = tensor(b"a", dt, [2], (i64s(-(1 << 63), 5) if dt == I64 else struct.pack("<2i", -(1 << 31), 5) if dt == I32 else b"\xff\x05"))
            for bname, braw in [("zero", raw0), ("minus1", rawm1)]:
                d = tensor(b"d", dt, [1], braw)
                o.put(P, "int_%s_%s_by_%s" % (tag, name, bname), one([onnx_node(op, [b"a", b"d"], [b"q"], at),
                                                                      onnx_node(b"Cast", [b"q"], [b"qf"], [attr(b"to", A_INT, i=F32)]),
                                                                      onnx_node(b"Add", [b"x", b"qf"], [b"y"])], inits=[a, d]))
        o.put(P, "int_%s_mixed_types" % tag, one([onnx_node(op, [b"c", b"e"], [b"y"], at)], inits=[c, tensor(b"e", I32, [2], struct.pack("<2i", 1, 2))]))
        o.put(P, "int_%s_no_broadcast" % tag, one([onnx_node(op, [b"c", b"e"], [b"y"], at)], inits=[c, tensor(b"e", I64, [3], i64s(1, 2, 3))]))
        o.put(P, "int_%s_empty" % tag, one([onnx_node(op, [b"c", b"e"], [b"q"], at), onnx_node(b"Cast", [b"q"], [b"y"], [attr(b"to", A_INT, i=F32)])],
                                            inits=[tensor(b"c", I64, [0], b""), tensor(b"e", I64, [0], b"")]))
    o.put(P, "int_mod_bool", one([onnx_node(b"Mod", [b"c", b"c"], [b"y"])], inits=[tensor(b"c", 9, [2], b"\1\0")]))

    # attributes against the operators' schemas, and declared shapes
    cat = lambda *attrs: one([onnx_node(b"Concat", [b"x", b"x"], [b"y"], list(attrs), name=b"cat")])
    o.put(P, "attr_concat_no_axis", cat())
    o.put(P, "attr_concat_axis_string", cat(attr(b"axis", A_STRING, s=b"zero")))
    o.put(P, "attr_concat_axis_float", cat(attr(b"axis", A_FLOAT, f=0.0)))
    o.put(P, "attr_concat_axis_ints", cat(attr(b"axis", A_INTS, ints=[0, 1])))
    o.put(P, "attr_concat_axis_tensor", cat(attr(b"axis", A_TENSOR, t=tensor(b"t", I64, [], i64s(0)))))
    o.put(P, "attr_concat_axis_graph", cat(attr(b"axis", A_GRAPH, g=onnx_graph())))
    o.put(P, "attr_concat_axis_untyped", cat(attr(b"axis", i=0)))
    o.put(P, "attr_concat_axis_empty", cat(attr(b"axis")))
    o.put(P, "attr_concat_axis_type_99", cat(attr(b"axis", 99, i=0)))
    o.put(P, "attr_concat_axis_type_neg", cat(attr(b"axis", -1, i=0)))
    o.put(P, "attr_concat_axis_twice", cat(attr(b"axis", A_INT, i=0), attr(b"axis", A_INT, i=1)))
    o.put(P, "attr_concat_axis_huge", cat(attr(b"axis", A_INT, i=(1 << 63))))
    o.put(P, "attr_concat_unknown", cat(attr(b"axis", A_INT, i=0), attr(b"bogus", A_INT, i=0)))
    o.put(P, "attr_concat_no_name", cat(attr(b"", A_INT, i=0)))
    o.put(P, "attr_cast_no_to", one([onnx_node(b"Cast", [b"x"], [b"y"])]))
    o.put(P, "attr_cast_to_float", one([onnx_node(b"Cast", [b"x"], [b"y"], [attr(b"to", A_FLOAT, f=1.0)])]))
    o.put(P, "attr_cast_to_99", one([onnx_node(b"Cast", [b"x"], [b"y"], [attr(b"to", A_INT, i=99)])]))
    o.put(P, "attr_maxpool_no_kernel", one([onnx_node(b"MaxPool", [b"x"], [b"y"])]))
    o.put(P, "attr_maxpool_kernel_int", one([onnx_node(b"MaxPool", [b"x"], [b"y"], [attr(b"kernel_shape", A_INT, i=2)])]))
    o.put(P, "attr_squeeze13_axes_attr", one([onnx_node(b"Squeeze", [b"x"], [b"y"], [attr(b"axes", A_INTS, ints=[0])])]))
    o.put(P, "attr_unsqueeze11_no_axes", one([onnx_node(b"Unsqueeze", [b"x"], [b"y"])], opset=11))
    o.put(P, "attr_slice9_no_starts", one([onnx_node(b"Slice", [b"x"], [b"y"], [attr(b"ends", A_INTS, ints=[1])])], opset=9))
    o.put(P, "attr_pad2_no_pads", one([onnx_node(b"Pad", [b"x"], [b"y"])], opset=2))
    o.put(P, "attr_softmax_axis_string", one([onnx_node(b"Softmax", [b"x"], [b"y"], [attr(b"axis", A_STRING, s=b"1")])]))
    o.put(P, "attr_gemm_alpha_int", one([onnx_node(b"Gemm", [b"x", b"x"], [b"y"], [attr(b"alpha", A_INT, i=2)])]))
    o.put(P, "attr_constant_two_values", one([onnx_node(b"Constant", [], [b"y"], [attr(b"value_float", A_FLOAT, f=1.0), attr(b"value_int", A_INT, i=1)])]))
    o.put(P, "attr_constant_value_string", one([onnx_node(b"Constant", [], [b"y"], [attr(b"value", A_STRING, s=b"x")])]))
    o.put(P, "attr_ref", one([onnx_node(b"Relu", [b"x"], [b"y"], [ld(1, b"a") + ld(21, b"outer") + key(20, 0) + varint(A_INT)])]))
    for dims in [(b"N", -5), (-2, 2), (-(1 << 63), 2), ((1 << 63) - 1, 2), (-1, 2), (0, 2), (1 << 40, 1 << 40), tuple(range(1, 12))]:
        name = "_".join(("m%d" % -d if isinstance(d, int) and d < 0 else str(d) if isinstance(d, int) else d.decode()) for d in dims)
        o.put(P, "dims_%s" % name[:60], one([onnx_node(b"Relu", [b"x"], [b"y"])], inputs=[value_info(b"x", dims=dims)]))

    # external data reached through symbolic links: the files live in onnx/.ext (a hidden folder
    # the harnesses do not feed as models); a link that resolves outside the model's folder is
    # refused whatever its name says
    ext = os.path.join(o.root, P, ".ext")
    os.makedirs(ext)
    with open(os.path.join(ext, "good.bin"), "wb") as f:
        f.write(struct.pack("<2f", 1.0, -2.0))
    links = {"inside.bin": "good.bin", "passwd": "/etc/passwd", "zero": "/dev/zero", "root": "/", "up": "..",
             "upup": "../..", "dangling": "missing.bin", "loop": "loop", "self_dir": ".", "good_dir": "../../good"}
    for name, target in links.items():
        os.symlink(target, os.path.join(ext, name))
    for i, loc in enumerate([b".ext/good.bin", b".ext/inside.bin", b".ext/passwd", b".ext/zero", b".ext/root/etc/passwd",
                             b".ext/up/.ext/good.bin", b".ext/upup/good/x22.npy", b".ext/dangling", b".ext/loop",
                             b".ext/self_dir", b".ext/self_dir/good.bin", b".ext/good_dir/x22.npy", b".ext",
                             b"/etc/passwd", b"../good/x22.npy", b".ext/../.ext/good.bin", b".ext\\..\\..\\good\\x22.npy"]):
        bx = tensor(b"b", F32, [2], location=loc)
        o.put(P, "ext_%02d_%s" % (i, loc.decode().replace("/", "_").replace("\\", "_").replace(".", "")),
              onnx_model(onnx_graph([onnx_node(b"Add", [b"x", b"b"], [b"y"])], [x], [y], [bx])))


# ---- the CLI pass ----

SANITIZER_MARKS = ("runtime error:", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "SUMMARY: AddressSanitizer",
                   "SUMMARY: UndefinedBehaviorSanitizer")


def cli_commands(nabla, root, parser, path):
    good = os.path.join(root, "good")
    if parser in ("safetensors", "npy"):
        yield [nabla, "info", path]
    if parser == "safetensors":
        yield [nabla, "predict", path, os.path.join(good, "images.idx"), "--top", "2"]
        yield [nabla, "eval", path, "--data", "/nonexistent"]
    if parser == "idx":
        yield [nabla, "predict", os.path.join(good, "mlp.safetensors"), path, "--top", "2"]
    if parser == "events":
        yield [nabla, "plot", path, "--text"]
    if parser == "png":
        yield [nabla, "predict", os.path.join(good, "mlp.safetensors"), path]
    if parser == "onnx":
        yield [nabla, "info", path]
        yield [nabla, "run", path, "--input", os.path.join(good, "x22.npy")]
        yield [nabla, "run", path, "--input", os.path.join(good, "x22.npy"), "--compile"]


def run_cli(nabla, root):
    jobs = []
    # a build without ONNX says so for every model: its onnx pass would prove nothing
    r = subprocess.run([nabla, "info", os.path.join(root, "good", "model.onnx")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    skipped = ["onnx"] if b"built without ONNX" in r.stderr else []
    for parser in PARSERS:
        if parser in skipped:
            continue
        d = os.path.join(root, parser)
        for name in sorted(os.listdir(d)):
            if name.startswith("."):  # onnx/.ext: the external data the models name
                continue
            for cmd in cli_commands(nabla, root, parser, os.path.join(d, name)):
                jobs.append((parser, cmd))
    # the good files first: a harness that rejects them proves nothing about the hostile ones
    sanity = [[nabla, "info", os.path.join(root, "good", "mlp.safetensors")],
              [nabla, "predict", os.path.join(root, "good", "mlp.safetensors"), os.path.join(root, "good", "images.idx")],
              [nabla, "plot", os.path.join(root, "good", "events.out.tfevents.good"), "--text"]]
    if not skipped:
        sanity += [[nabla, "run", os.path.join(root, "good", "model.onnx"), "--input", os.path.join(root, "good", "x22.npy")],
                   [nabla, "run", os.path.join(root, "good", "model.onnx"), "--input", os.path.join(root, "good", "x22.npy"), "--compile"]]
    bad = []
    for cmd in sanity:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        if r.returncode != 0:
            bad.append("good file rejected: %s -> %d: %s" % (" ".join(cmd), r.returncode, r.stderr.decode(errors="replace")[-500:]))

    def one(job):
        parser, cmd = job
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        except subprocess.TimeoutExpired:
            return parser, "%s: hung (over 120 s)" % " ".join(cmd)
        err = r.stderr.decode(errors="replace")
        out = r.stdout.decode(errors="replace")
        if r.returncode < 0:
            return parser, "%s: killed by signal %d\n%s" % (" ".join(cmd), -r.returncode, err[-2000:])
        for m in SANITIZER_MARKS:
            if m in err or m in out:
                i = (err + out).find(m)
                return parser, "%s: sanitizer report (exit %d)\n%s" % (" ".join(cmd), r.returncode, (err + out)[max(0, i - 200):i + 2500])
        if r.returncode != 0 and not err.strip():
            return parser, "%s: exit %d with no message on stderr" % (" ".join(cmd), r.returncode)
        return parser, None

    tried = {}
    failed = {}
    with ThreadPoolExecutor(max_workers=int(os.environ.get("HOSTILE_JOBS", "2"))) as ex:
        for parser, problem in ex.map(one, jobs):
            tried[parser] = tried.get(parser, 0) + 1
            if problem:
                failed[parser] = failed.get(parser, 0) + 1
                bad.append(problem)
    for p in PARSERS:
        if p in skipped:
            print("%-12s skipped: nabla is built without ONNX" % p)
        else:
            print("%-12s %5d runs of nabla, %d failed" % (p, tried.get(p, 0), failed.get(p, 0)))
    for b in bad:
        print("FAIL " + b)
    return 1 if bad else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "--cli":
        return run_cli(argv[2], argv[3])
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    o = Out(argv[1])
    gens = {"safetensors": gen_safetensors, "npy": gen_npy, "idx": gen_idx, "csv": gen_csv, "png": gen_png,
            "events": gen_events, "onnx": gen_onnx}
    for p in PARSERS:
        gens[p](o, random.Random("nabla-hostile-" + p))
    for p in PARSERS:
        print("%-12s %5d hostile files" % (p, o.count.get(p, 0)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
