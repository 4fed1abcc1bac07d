"""Writes small models built with onnx.helper, at opsets 11, 13, 17, 18 and 21, with ONNX
Runtime's outputs, in the folder format of tests/onnx_node_data.py (so onnx_conformance checks
them, there within 1e-4): a CNN (Conv, BatchNormalization, Relu, MaxPool, GlobalAveragePool,
Flatten, Gemm) and an attention block (LayerNormalization, or its expansion before opset 17;
Shape->Gather->Concat->Reshape, Transpose, MatMul, Softmax, Split, Unsqueeze/Squeeze, ReduceMean,
Clip, Erf GELU), each with a symbolic batch dimension; integer Div and Mod past 2^53; and the
operators whose defaults or forms changed between versions (OLD_DEFAULTS: Softmax and LogSoftmax
before 13, ReduceSum, Split, Squeeze and Unsqueeze before 13, Clip and Pad before 11, Slice before
10...) at the opsets around each change. Each model passes onnx.checker first.

Usage: python tests/onnx_import_ref.py OUT
"""
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_node_data import write_manifest, write_model_case  # noqa: E402

rng = np.random.default_rng(18)


def init(name, *shape, scale=0.5):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def axes_node(op, opset, since, inputs, output, axes, name, inits, **attrs):
    """A node whose axes are an attribute before opset `since`, an input from it."""
    if opset < since:
        return helper.make_node(op, inputs, [output], axes=axes, name=name, **attrs)
    inits.append(i64(name + "_axes", axes))
    return helper.make_node(op, inputs + [name + "_axes"], [output], name=name, **attrs)


def cnn(opset):
    inits = [init("w1", 4, 3, 3, 3), init("b1", 4), init("bn_s", 4), init("bn_b", 4), init("bn_m", 4, scale=0.1),
             numpy_helper.from_array((rng.random(4) + 0.5).astype(np.float32), "bn_v"), init("w2", 5, 4), init("b2", 5)]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], epsilon=1e-5, name="bn"),
        helper.make_node("Relu", ["bn"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p1"], ["g1"]),
        helper.make_node("Flatten", ["g1"], ["f1"], axis=1),
        helper.make_node("Gemm", ["f1", "w2", "b2"], ["y"], transB=1, alpha=1.5, beta=0.5),
    ]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], inits)
    return g, {"x": rng.standard_normal((2, 3, 8, 8)).astype(np.float32)}


def attention(opset):
    D, H = 8, 2
    inits = [init("ln_s", D), init("ln_b", D), init("wq", D, D), init("wo", D, D),
             i64("idx01", [0, 1]), i64("heads", [H, D // H]), i64("merged", [D]),
             numpy_helper.from_array(np.array(-2.0, np.float32), "lo"), numpy_helper.from_array(np.array(2.0, np.float32), "hi")]
    nodes = []
    if opset >= 17:
        nodes.append(helper.make_node("LayerNormalization", ["t", "ln_s", "ln_b"], ["ln"], axis=-1, epsilon=1e-5))
    else:  # what exporters write before LayerNormalization existed
        inits.append(numpy_helper.from_array(np.array(2.0, np.float32), "two"))
        inits.append(numpy_helper.from_array(np.array(1e-5, np.float32), "eps"))
        nodes += [axes_node("ReduceMean", opset, 18, ["t"], "mu", [-1], "rm1", inits),
                  helper.make_node("Sub", ["t", "mu"], ["xc"]),
                  helper.make_node("Pow", ["xc", "two"], ["sq"]),
                  axes_node("ReduceMean", opset, 18, ["sq"], "var", [-1], "rm2", inits),
                  helper.make_node("Add", ["var", "eps"], ["ve"]),
                  helper.make_node("Sqrt", ["ve"], ["sd"]),
                  helper.make_node("Div", ["xc", "sd"], ["xn"]),
                  helper.make_node("Mul", ["xn", "ln_s"], ["xs"]),
                  helper.make_node("Add", ["xs", "ln_b"], ["ln"])]
    nodes += [
        helper.make_node("MatMul", ["ln", "wq"], ["q"]),
        # Shape -> Gather -> Concat -> Reshape: [N, T, D] -> [N, T, H, D/H]
        helper.make_node("Shape", ["q"], ["qs"]),
        helper.make_node("Gather", ["qs", "idx01"], ["nt"], axis=0),
        helper.make_node("Concat", ["nt", "heads"], ["hs"], axis=0),
        helper.make_node("Reshape", ["q", "hs"], ["qh"]),
        helper.make_node("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["qh"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["qt", "kt"], ["sc"]),
    ]
    if opset < 13:  # Softmax coerces to 2-D before 13: flatten the last axis alone
        nodes.append(helper.make_node("Softmax", ["sc"], ["pr"], axis=3))
    else:
        nodes.append(helper.make_node("Softmax", ["sc"], ["pr"], axis=-1))
    nodes += [
        helper.make_node("MatMul", ["pr", "qt"], ["ctx"]),
        helper.make_node("Transpose", ["ctx"], ["ct"], perm=[0, 2, 1, 3]),
        helper.make_node("Concat", ["nt", "merged"], ["ms"], axis=0),
        helper.make_node("Reshape", ["ct", "ms"], ["cm"]),
        helper.make_node("MatMul", ["cm", "wo"], ["o"]),
    ]
    # Split in two along the features (split sizes an attribute before 13, an input from 13;
    # from 18 num_outputs may say it), GELU by Erf on one half, Clip with input bounds
    if opset < 13:
        nodes.append(helper.make_node("Split", ["o"], ["o1", "o2"], axis=-1, split=[4, 4]))
    elif opset < 18:
        inits.append(i64("halves", [4, 4]))
        nodes.append(helper.make_node("Split", ["o", "halves"], ["o1", "o2"], axis=-1))
    else:
        nodes.append(helper.make_node("Split", ["o"], ["o1", "o2"], axis=-1, num_outputs=2))
    inits += [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in
              [("rs2", 1 / np.sqrt(2)), ("one", 1.0), ("half", 0.5)]]
    nodes += [
        helper.make_node("Mul", ["o1", "rs2"], ["e0"]), helper.make_node("Erf", ["e0"], ["e1"]),
        helper.make_node("Add", ["e1", "one"], ["e2"]), helper.make_node("Mul", ["o1", "e2"], ["e3"]),
        helper.make_node("Mul", ["e3", "half"], ["gl"]),
        helper.make_node("Clip", ["o2", "lo", "hi"], ["cl"]),
        helper.make_node("Concat", ["gl", "cl"], ["cat"], axis=-1),
        axes_node("Unsqueeze", opset, 13, ["cat"], "u", [1], "unsq", inits),
        axes_node("Squeeze", opset, 13, ["u"], "sq2", [1], "sqz", inits),
        axes_node("ReduceMean", opset, 18, ["sq2"], "y", [1], "pool", inits, keepdims=0),
    ]
    g = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("t", TensorProto.FLOAT, ["N", 6, D])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", D])], inits)
    return g, {"t": rng.standard_normal((3, 6, D)).astype(np.float32)}


def int_div_mod(opset):
    """Integer Div (truncating) and Mod (fmod 0: the divisor's sign) past 2^53, where f64 loses
    the last bits, with both signs and INT64_MIN + 1 / -1; fmod 1 (the dividend's sign) on values
    below 2^53, since ONNX Runtime computes integer fmod in double."""
    big = 2 ** 53
    a = np.array([big + 1, big + 3, -(big + 1), 2 ** 62 + 5, -7, 7, -7, 7, -2 ** 63 + 1, 2 ** 63 - 1], np.int64)
    b = np.array([1, 7, 7, 3, 2, -2, -2, 2, -1, -1], np.int64)
    c = np.array([-7, 7, -7, 7, 13, -13, 5, 0], np.int64)
    d = np.array([2, -2, -2, 2, 5, 5, -3, 4], np.int64)
    nodes = [helper.make_node("Div", ["a", "b"], ["q"]),
             helper.make_node("Mod", ["a", "b"], ["r"]),
             helper.make_node("Mod", ["c", "d"], ["f"], fmod=1),
             helper.make_node("Concat", ["q", "r", "f"], ["y"], axis=0)]
    g = helper.make_graph(nodes, "int_div_mod", [helper.make_tensor_value_info(k, TensorProto.INT64, ["N" if k < "c" else "M"]) for k in "abcd"],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, ["L"])])
    return g, {"a": a, "b": b, "c": c, "d": d}


def one_node(op, inputs, shape, inits=(), out_shape=None, **attrs):
    """A model of one node on input x (f32, shape) with initializers inits; its output y."""
    ins = ["x"] + [t.name if t is not None else "" for t in inits]
    while ins and ins[-1] == "":
        ins.pop()
    node = helper.make_node(op, ins, ["y"], **attrs)
    g = helper.make_graph([node], op.lower(), [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.INT64 if op.startswith("Arg") else TensorProto.FLOAT, out_shape)],
                          [t for t in inits if t is not None])
    return g, {"x": rng.standard_normal(shape).astype(np.float32)}


def f32(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.float32), name)


# Operators whose defaults or attribute/input forms changed between versions, each at the model
# opsets around the change, run with the defaults (no axis where one is optional): Softmax and
# LogSoftmax before 13 take axis 1 and coerce the input to 2-D [N, prod(rest)]; ReduceSum's axes
# and Split's sizes and Squeeze's and Unsqueeze's axes are attributes before 13; Clip's bounds and
# Pad's pads and value are attributes before 11; Slice's starts and ends before 10.
OLD_DEFAULTS = [
    ("softmax_default", (11, 12, 13), lambda o: one_node("Softmax", [], (2, 3, 4))),
    ("logsoftmax_default", (11, 12, 13), lambda o: one_node("LogSoftmax", [], (2, 3, 4))),
    ("softmax_axis0", (11, 12), lambda o: one_node("Softmax", [], (2, 3, 4), axis=0)),
    ("softmax_axis2", (11, 12), lambda o: one_node("Softmax", [], (2, 3, 4, 2), axis=2)),
    ("logsoftmax_axis_neg1", (11, 12), lambda o: one_node("LogSoftmax", [], (2, 3, 4), axis=-1)),
    ("reducesum_default", (11, 12, 13), lambda o: one_node("ReduceSum", [], (2, 3, 4))),
    ("reducesum_axes", (11, 12, 13), lambda o: one_node("ReduceSum", [], (2, 3, 4), axes=[0, -1]) if o < 13 else
     one_node("ReduceSum", [], (2, 3, 4), inits=[i64("axes", [0, -1])])),
    ("reducemean_default", (11, 12, 13), lambda o: one_node("ReduceMean", [], (2, 3, 4), keepdims=0)),
    ("reducemax_axes", (11, 12, 13), lambda o: one_node("ReduceMax", [], (2, 3, 4), axes=[1])),
    ("split_default", (11, 12, 13), lambda o: split_model(o, None)),
    ("split_sizes", (11, 12, 13), lambda o: split_model(o, [1, 3])),
    ("squeeze_default", (11, 12, 13), lambda o: one_node("Squeeze", [], (1, 3, 1, 2))),
    ("squeeze_axes", (11, 12, 13), lambda o: one_node("Squeeze", [], (1, 3, 1, 2), axes=[-2]) if o < 13 else
     one_node("Squeeze", [], (1, 3, 1, 2), inits=[i64("axes", [-2])])),
    ("unsqueeze_axes", (11, 12, 13), lambda o: one_node("Unsqueeze", [], (3, 2), axes=[0, -1]) if o < 13 else
     one_node("Unsqueeze", [], (3, 2), inits=[i64("axes", [0, -1])])),
    ("clip_min_only", (10, 11, 12), lambda o: one_node("Clip", [], (3, 4), min=-0.5) if o < 11 else
     one_node("Clip", [], (3, 4), inits=[f32("lo", -0.5)])),
    ("clip_max_only", (10, 11, 12), lambda o: one_node("Clip", [], (3, 4), max=0.25) if o < 11 else
     one_node("Clip", [], (3, 4), inits=[None, f32("hi", 0.25)])),
    ("clip_default", (10, 11, 12), lambda o: one_node("Clip", [], (3, 4))),
    ("pad_default", (10, 11, 12), lambda o: one_node("Pad", [], (2, 3), pads=[0, 1, 1, 2]) if o < 11 else
     one_node("Pad", [], (2, 3), inits=[i64("pads", [0, 1, 1, 2])])),
    ("pad_value", (10, 11, 12), lambda o: one_node("Pad", [], (2, 3), pads=[1, 0, 0, 1], value=1.5) if o < 11 else
     one_node("Pad", [], (2, 3), inits=[i64("pads", [1, 0, 0, 1]), f32("v", 1.5)])),
    ("pad_reflect", (10, 11, 12), lambda o: one_node("Pad", [], (2, 4), pads=[0, 2, 0, 1], mode="reflect") if o < 11 else
     one_node("Pad", [], (2, 4), inits=[i64("pads", [0, 2, 0, 1])], mode="reflect")),
    ("slice_default_axes", (9, 10, 11), lambda o: one_node("Slice", [], (4, 5), starts=[1, -3], ends=[3, 100]) if o < 10 else
     one_node("Slice", [], (4, 5), inits=[i64("st", [1, -3]), i64("en", [3, 100])])),
    ("gemm_no_c", (11, 12), lambda o: one_node("Gemm", [], (3, 4), inits=[init("w", 4, 2)])),
    ("argmax_default", (11, 12), lambda o: one_node("ArgMax", [], (3, 4))),
]


def split_model(opset, sizes):
    """Split of x [2, 4] along the default axis 0... of its transpose: two outputs concatenated back."""
    attrs, inits = {}, []
    if sizes is not None:
        if opset < 13:
            attrs["split"] = sizes
        else:
            inits.append(i64("sizes", sizes))
    split = helper.make_node("Split", ["xt"] + [t.name for t in inits], ["p", "q"], **attrs)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]), split,
             helper.make_node("Mul", ["q", "q"], ["q2"]), helper.make_node("Concat", ["p", "q2"], ["y"], axis=0)]
    g = helper.make_graph(nodes, "split", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return g, {"x": rng.standard_normal((2, 4)).astype(np.float32)}


def main():
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    lines = []
    cases = [(opset, name, make) for opset in (11, 13, 17, 18, 21) for name, make in (("cnn", cnn), ("attention", attention))]
    cases += [(13, "int_div_mod", int_div_mod)]
    cases += [(opset, name, make) for name, opsets, make in OLD_DEFAULTS for opset in opsets]
    for opset, name, make in cases:
        g, feeds = make(opset)
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnx_import_ref")
        model.ir_version = 7 if opset < 15 else 8 if opset < 19 else 10 if opset < 21 else 10
        for vo in model.graph.output:  # an output declared without a shape: the one ONNX Runtime gives
            if not vo.type.tensor_type.HasField("shape"):
                got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run([vo.name], feeds)[0]
                vo.type.tensor_type.shape.SetInParent()
                for d in got.shape:
                    vo.type.tensor_type.shape.dim.add().dim_value = d
        onnx.checker.check_model(model, full_check=True)

        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        ys = sess.run(None, feeds)
        path = os.path.join(out, "model.onnx")
        onnx.save(model, path)
        lines.append(write_model_case(out, "%s_opset%d" % (name, opset), name, path,
                                      [feeds[vi.name] for vi in g.input], ys))
        os.remove(path)
    write_manifest(out, lines)
    print("onnx_import_ref.py: %d models into %s" % (len(lines), out))


if __name__ == "__main__":
    main()
