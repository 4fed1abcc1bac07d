#!/usr/bin/env python3
"""The layers of DESIGN.md section 2, held by what each source file includes, followed through
every header it reaches: a backend knows nothing of autograd, ops or layers, and of the compiler
only the graph IR its lowering runs (src/compile/ir.h); the compiler reaches no backend's own
files (it finds a lowering through the registry); the ops know no layer (nabla/nn.h); core knows
nothing above it; nothing below src/onnx/ reaches it; and, by calls, the compiler's files stand on its IR (ir.c) without
a circle, and a backend's lowering calls only the IR's functions of the compiler. Prints each breach with the include chain that
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
    # a backend reaches no other backend, either way: what they share is in src/backend/ itself
    # (formulas.h, kmath.h, prep.h, pool_geom.h, gemm_layout.h, ctc_recursion.h)
    ("src/backend/cuda/", ["src/backend/cpu/"], "a backend reaches no other backend (shared helpers live in src/backend/)"),
    ("src/backend/cpu/", ["src/backend/cuda/"], "a backend reaches no other backend (shared helpers live in src/backend/)"),
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

# The areas above ops (nabla/nn.h and up), each knowing only the areas under it: layers know no
# optimizer, data, file or run; optimizers no data or file; the data pipeline and the file formats
# no layer or optimizer; the summary writer only the files (io's atomic writes); distributed training stands on all of
# these but on no model format above it (ONNX, Hugging Face).
ABOVE_OPS = ["src/nn/", "src/optim/", "src/data/", "src/io/", "src/summary/", "src/model/", "src/dist/",
             "src/onnx/", "src/hf/", "src/compile/"]
for area, may in (("src/nn/", []), ("src/optim/", ["src/nn/"]), ("src/data/", []), ("src/io/", []),
                  ("src/summary/", ["src/io/"]), ("src/dist/", ["src/nn/", "src/optim/", "src/data/", "src/io/"])):
    rules.append((area, [a for a in ABOVE_OPS if a != area and a not in may],
                  "an area knows only the areas under it (docs/design.md, the layers)"))
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
# nor does a backend name another backend's symbols (nb__cpu_* in cuda/, nb__cuda_* in cpu/)
for sub, other in (("cuda", "nb__cpu_"), ("cpu", "nb__cuda_")):
    for dirpath, _, files in os.walk(os.path.join(root, "src", "backend", sub)):
        for fn in sorted(files):
            path = os.path.join(dirpath, fn)
            with open(path, encoding="utf-8") as fh:
                for no, line in enumerate(fh, 1):
                    if other in line:
                        print(f"{rel(path)}:{no} names another backend's symbol ({other}*): {line.strip()}")
                        bad += 1
# An area's own header (src/*/*_impl.h and the other internal headers) names the public headers it
# needs, never the umbrella nabla.h, so what an area stands on is visible in one place.
for dirpath, _, files in os.walk(os.path.join(root, "src")):
    for fn in sorted(files):
        if fn.endswith(".h"):
            path = os.path.join(dirpath, fn)
            with open(path, encoding="utf-8") as fh:
                for name in include_re.findall(fh.read()):
                    if resolve(name, dirpath) == os.path.join(root, "include", "nabla.h"):
                        print(f"{rel(path)} includes the umbrella nabla.h (an internal header names what it needs)")
                        bad += 1
comment_re = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
define_re = re.compile(r"^[A-Za-z_][\w \*]*?\b(nb__\w+)\(([^;{}]|\n)*?\)\s*\{", re.M)
call_re = re.compile(r"\b(nb__\w+)\s*\(")


def code_of(path):
    with open(path, encoding="utf-8") as fh:
        return comment_re.sub(" ", fh.read())


# An nb__ function is declared in the header named for its area, never by hand in the .c file that
# calls it (a prototype there goes stale unseen when the definition changes).
proto_re = re.compile(r"^(?:extern\s+)?(?:const\s+)?[A-Za-z_]\w*[\s\*]+(nb__\w+)\([^;{]*\)\s*;", re.M)
for dirpath, _, files in os.walk(os.path.join(root, "src")):
    for fn in sorted(files):
        if fn.endswith(".c"):
            path = os.path.join(dirpath, fn)
            for m in proto_re.finditer(code_of(path)):
                print(f"{rel(path)} declares {m.group(1)} itself (its prototype belongs in its area's header)")
                bad += 1
# Calls, not only includes: the compiler's own functions (nb__ names defined in src/compile/) form
# layers too. The IR's store and queries (ir.c, and layout.c for the fused loop's layout: what
# ir.h declares) are the bottom: they call no other compiler file, the tracer, passes, planning
# and pipeline above them call each other without a cycle, and a backend's lowering calls only
# the IR's functions of the compiler.
IR_FILES = {"ir.c", "layout.c"}
compile_dir = os.path.join(root, "src", "compile")
compile_files = sorted(f for f in os.listdir(compile_dir) if f.endswith(".c"))
defined_in = {}
for f in compile_files:
    for m in define_re.finditer(code_of(os.path.join(compile_dir, f))):
        defined_in[m.group(1)] = f
calls = {f: {} for f in compile_files}  # file -> {file it calls: a function it calls there}
for f in compile_files:
    for name in call_re.findall(code_of(os.path.join(compile_dir, f))):
        g = defined_in.get(name)
        if g and g != f:
            calls[f].setdefault(g, name)
for f in sorted(IR_FILES & set(compile_files)):
    for g, name in sorted(calls[f].items()):
        if g not in IR_FILES:
            print(f"src/compile/{f} calls {name} of src/compile/{g} (the IR calls nothing above it)")
            bad += 1
state = {}


def visit(f, path):
    state[f] = 1
    for g in sorted(calls[f]):
        if state.get(g) == 1:
            cycle = path[path.index(g):] + [g]
            print("src/compile/ calls in a circle: " + " -> ".join(cycle))
            return 1
        if not state.get(g) and visit(g, path + [g]):
            return 1
    state[f] = 2
    return 0


for f in compile_files:
    if not state.get(f) and visit(f, [f]):
        bad += 1
        break  # one circle is enough to name; the others show once it is cut
for dirpath, _, files in os.walk(os.path.join(root, "src", "backend")):
    for fn in sorted(files):
        if not fn.endswith((".c", ".h", ".cu", ".inc")):
            continue
        path = os.path.join(dirpath, fn)
        for name in sorted(set(call_re.findall(code_of(path)))):
            g = defined_in.get(name)
            if g and g not in IR_FILES:
                print(f"{rel(path)} calls {name} of src/compile/{g} (a lowering calls only the IR's functions, ir.h)")
                bad += 1

if checked == 0:
    print("no sources found under", root)
    sys.exit(1)
print(f"{checked} source files checked, {bad} breaches")
sys.exit(1 if bad else 0)
