"""Compares the importer's attribute schemas (src/onnx/import_ops.c's table, written by
`onnx_conformance --attrs FILE`) with onnx's own operator schemas, version by version: every
attribute nabla accepts must exist in that version with the same type and the same required
flag, and every attribute onnx requires must be one nabla checks. Attributes onnx has and nabla
does not read are listed (a model using them is refused at load, naming the attribute).

Usage: python tests/onnx_attr_schema.py ATTRS_FILE
"""
import sys

from onnx import defs

TYPES = {"FLOAT": "float", "INT": "int", "STRING": "string", "TENSOR": "tensor", "GRAPH": "graph",
         "FLOATS": "floats", "INTS": "ints", "STRINGS": "strings", "TENSORS": "tensors", "GRAPHS": "graphs",
         "SPARSE_TENSOR": "sparse tensor", "SPARSE_TENSORS": "sparse tensors", "TYPE_PROTO": "type",
         "TYPE_PROTOS": "types"}


def main():
    ours = {}
    for line in open(sys.argv[1]):
        f = line.split()
        key = (f[0], int(f[1]))
        ours.setdefault(key, {})
        if f[2] != "-":
            ours[key][f[2]] = (" ".join(f[3:-1]), f[-1] == "1")
    bad, unread, checked = [], set(), 0
    for (op, v), attrs in sorted(ours.items()):
        sc = defs.get_schema(op, v)
        if sc.since_version != v:
            bad.append("%s version %d: onnx has no such version (the nearest is %d)" % (op, v, sc.since_version))
            continue
        theirs = {a: (TYPES[str(s.type).split(".")[-1]], bool(s.required)) for a, s in sc.attributes.items()}
        for a, (t, req) in attrs.items():
            checked += 1
            if a not in theirs:
                bad.append("%s version %d: nabla accepts attribute '%s', which onnx's schema lacks" % (op, v, a))
            elif theirs[a] != (t, req):
                bad.append("%s version %d: '%s' is %s%s in nabla's table, %s%s in onnx's" % (
                    op, v, a, t, " required" if req else "", theirs[a][0], " required" if theirs[a][1] else ""))
        for a, (t, req) in theirs.items():
            if a not in attrs:
                if req:
                    bad.append("%s version %d: onnx requires attribute '%s' (%s), which nabla's table lacks" % (op, v, a, t))
                unread.add("%s.%s" % (op, a))
    print("onnx_attr_schema: %d operator versions, %d attributes compared with onnx %s" % (len(ours), checked, __import__("onnx").__version__))
    print("attributes nabla does not read (refused at load): " + ", ".join(sorted(unread)))
    for b in bad:
        print("FAIL " + b)
    if bad:
        return 1
    print("onnx_attr_schema: the table matches onnx's schemas")
    return 0


if __name__ == "__main__":
    sys.exit(main())
