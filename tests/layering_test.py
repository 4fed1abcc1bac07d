#!/usr/bin/env python3
"""The layers of DESIGN.md section 2, held by what each source file includes, followed through
every header it reaches: a backend knows nothing of autograd, ops or layers, and of the compiler
only the graph IR its lowering runs (src/compile/ir.h); the compiler reaches no backend's own
files (it finds a lowering through the registry); the ops know no layer (nabla/nn.h); core knows
nothing above it; nothing below src/onnx/ reaches it. Prints each breach with the include chain that
makes it and exits 1."""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
root = os.path.abspath(root)
include_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def resolve(name, here):
    for base in (here, os.path.join(root, "include")):
        p = os.path.normpath(os.path.join(base, name))
        if os.path.exists(p):
            return p
    return None


def closure(path):
    """Every project file path reaches, each with the chain of includes that reaches it."""
    seen = {path: [path]}
    todo = [path]
    while todo:
        f = todo.pop()
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        for name in include_re.findall(text):
            p = resolve(name, os.path.dirname(f))
            if p and p not in seen:
                seen[p] = seen[f] + [p]
                todo.append(p)
    return seen


def rel(p):
    return os.path.relpath(p, root)


# (files the rule covers, what they must not reach, why); a reached path breaks the rule when it
# starts with any of the forbidden prefixes and is not one of the allowed files below
rules = [
    ("src/backend/", ["src/autograd/", "src/ops/ops_impl.h", "src/ops/infer", "src/ops/dispatch", "src/nn/",
                      "src/optim/", "src/compile/", "src/data/", "src/io/", "src/summary/", "src/model/",
                      "include/nabla.h", "include/nabla/nn.h", "include/nabla/ops.h", "include/nabla/autograd.h"],
     "a backend knows nothing of autograd, ops or layers (kernel types are src/backend/kernel.h)"),
    ("src/compile/", ["src/backend/cpu/"],
     "the compiler is device-neutral: it reaches a backend's lowering through the registry (backend.h)"),
    ("src/ops/", ["include/nabla.h", "include/nabla/nn.h", "src/nn/", "src/optim/", "src/compile/", "src/data/",
                  "src/io/", "src/summary/", "src/model/"],
     "ops know no layer: the functional forms are declared in nabla/functional.h"),
    ("src/autograd/graph", ["src/ops/ops_impl.h", "include/nabla.h", "include/nabla/nn.h"],
     "the graph record sits below ops"),
    ("src/core/", ["src/", "include/nabla.h", "include/nabla/nn.h", "include/nabla/ops.h"],
     "core knows nothing above it"),
]
# ONNX (src/onnx/) stands on the tracer, io and nn: nothing below it reaches its internals
for below in ("src/backend/", "src/autograd/", "src/ops/", "src/nn/", "src/optim/", "src/compile/", "src/io/",
              "src/data/", "src/summary/"):
    rules.append((below, ["src/onnx/"], "ONNX import and export sit above the layers they use"))
# Hugging Face models and tokenizers (src/hf/) sit on the same floor: nothing below reaches them
for below in ("src/core/", "src/backend/", "src/autograd/", "src/ops/", "src/nn/", "src/optim/", "src/compile/",
              "src/io/", "src/data/", "src/summary/"):
    rules.append((below, ["src/hf/"], "Hugging Face models and tokenizers sit above the layers they use"))
# the model server (src/serve/) is the top floor: no library layer reaches it
for below in ("src/core/", "src/backend/", "src/autograd/", "src/ops/", "src/nn/", "src/optim/", "src/compile/",
              "src/io/", "src/data/", "src/summary/", "src/onnx/", "src/hf/", "src/model/", "src/dist/"):
    rules.append((below, ["src/serve/"], "the model server sits above the layers it serves"))

# the graph IR is the contract between the compiler and a backend's lowering: a backend may read it
# (ir.h reaches only the backend interface and core)
allowed = {"src/compile/ir.h"}

bad = 0
checked = 0
for dirpath, _, files in os.walk(os.path.join(root, "src")):
    for fn in sorted(files):
        if not fn.endswith((".c", ".h", ".inc")):
            continue
        path = os.path.join(dirpath, fn)
        r = rel(path)
        reach = closure(path)
        checked += 1
        for prefix, forbidden, why in rules:
            if not r.startswith(prefix):
                continue
            for p, chain in sorted(reach.items()):
                q = rel(p)
                if q == r or (prefix == "src/core/" and q.startswith("src/core/")):
                    continue
                if any(q.startswith(f) for f in forbidden) and not q.endswith("ops.def") and q not in allowed:
                    print(f"{r} reaches {q} ({why}): " + " -> ".join(rel(c) for c in chain))
                    bad += 1
# the compiler names no backend's functions or tables either (nb__cpu_*): only the registry's
for dirpath, _, files in os.walk(os.path.join(root, "src", "compile")):
    for fn in sorted(files):
        path = os.path.join(dirpath, fn)
        with open(path, encoding="utf-8") as fh:
            for no, line in enumerate(fh, 1):
                if "nb__cpu_" in line:
                    print(f"{rel(path)}:{no} names a cpu backend symbol (the compiler is device-neutral): {line.strip()}")
                    bad += 1
if checked == 0:
    print("no sources found under", root)
    sys.exit(1)
print(f"{checked} source files checked, {bad} breaches")
sys.exit(1 if bad else 0)
