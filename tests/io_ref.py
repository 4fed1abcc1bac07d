#!/usr/bin/env python3
"""Interop of nabla's state dicts and .npy files with PyTorch and NumPy (tests/test_io.c).

  io_ref.py make DIR   writes PyTorch state dicts as safetensors (f32 and bf16; the format is
                       written here by hand since the `safetensors` package is not in Debian),
                       an input x.npy and PyTorch's outputs, and NumPy .npy files of many dtypes
                       and layouts.
  io_ref.py check DIR  reads nabla's files (written by test_io into DIR): loads
                       nabla_mlp.safetensors into the same PyTorch architecture and compares its
                       outputs with nabla_out.npy; np.load's every nabla_*.npy.
Run with Debian's python3-torch (/usr/bin/python3)."""
import json
import os
import struct
import sys

import numpy as np
import torch

ST_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL"}
ST_TORCH = {v: k for k, v in ST_DTYPES.items()}


def tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def save_safetensors(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        b = tensor_bytes(t)
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        dt = ST_TORCH[e["dtype"]]
        raw = bytearray(body[b:end])
        if dt == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16) if raw else torch.empty(0, dtype=dt)
        else:
            t = torch.frombuffer(raw, dtype=dt) if raw else torch.empty(0, dtype=dt)
        out[name] = t.reshape(e["shape"]).clone()
    return out, header.get("__metadata__", {})


def mlp():
    # nabla's mlp(6, 16, 3) in tests/test_io.c: the same keys ("0.weight", "1.running_mean", ...)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def make(d):
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    torch.manual_seed(0)
    m = mlp()
    for _ in range(3):  # move the batch-norm statistics away from their defaults
        m(torch.randn(10, 6) * 2 + 0.5)
    m.eval()
    x = torch.randn(5, 6)
    np.save(os.path.join(d, "x.npy"), x.numpy())
    sd = m.state_dict()
    save_safetensors(os.path.join(d, "torch_mlp.safetensors"), sd, {"format": "pt"})
    with torch.no_grad():
        np.save(os.path.join(d, "torch_out.npy"), m(x).numpy())
    # the same weights in bf16 (the counter stays i64); the reference runs the bf16-rounded weights in f32
    sdb = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in sd.items()}
    save_safetensors(os.path.join(d, "torch_mlp_bf16.safetensors"), sdb)
    m.load_state_dict({k: v.to(sd[k].dtype) for k, v in sdb.items()})
    with torch.no_grad():
        np.save(os.path.join(d, "torch_out_bf16.npy"), m(x).numpy())
    # NumPy files: arange(24).reshape(2, 3, 4) in many dtypes and layouts
    a = np.arange(24).reshape(2, 3, 4)
    for name in ["f4", "f8", "f2", "i8", "i4", "u1", "i2", "u2", "u4", "i1"]:
        np.save(os.path.join(d, "np_%s.npy" % name), a.astype("<" + name))
    np.save(os.path.join(d, "np_f4_fortran.npy"), np.asfortranarray(a.astype("<f4")))
    np.save(os.path.join(d, "np_f8_big.npy"), a.astype(">f8"))
    np.save(os.path.join(d, "np_i4_big_fortran.npy"), np.asfortranarray(a.astype(">i4")))
    np.save(os.path.join(d, "np_b1.npy"), a % 3 != 0)
    print("wrote", d)


def check(d):
    sd, _ = load_safetensors(os.path.join(d, "nabla_mlp.safetensors"))
    m = mlp()
    m.load_state_dict(sd, strict=True)
    m.eval()
    x = torch.from_numpy(np.load(os.path.join(d, "x.npy")))
    with torch.no_grad():
        y = m(x).numpy()
    ref = np.load(os.path.join(d, "nabla_out.npy"))
    diff = float(np.abs(y - ref).max())
    print("nabla state dict in PyTorch: max |diff| = %.3g" % diff)
    assert diff < 1e-5, diff
    assert int(sd["1.num_batches_tracked"]) == 3 and sd["1.num_batches_tracked"].dtype == torch.int64
    a = np.arange(24).reshape(2, 3, 4)
    want = {"f32": (a - 3).astype("f4"), "f64": (a - 3).astype("f8"), "f16": (a - 3).astype("f2"),
            "i64": (a - 3).astype("i8"), "i32": (a - 3).astype("i4"), "u8": a.astype("u1"), "bool": a % 2 == 1,
            "i8": (a - 3).astype("i1")}
    for name, w in want.items():
        got = np.load(os.path.join(d, "nabla_%s.npy" % name))
        assert got.dtype == w.dtype and got.shape == w.shape and (got == w).all(), name
    print("nabla .npy files read by NumPy: ok (%d dtypes)" % len(want))


if __name__ == "__main__":
    {"make": make, "check": check}[sys.argv[1]](sys.argv[2])
