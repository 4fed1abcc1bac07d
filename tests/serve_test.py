"""nabla serve end to end: ONNX models exported by torch.onnx.export (one with two inputs and two
outputs, in two versions; one with a 3-D input) served from a model config file on a free
loopback port, driven over HTTP with the standard library only, and compared bit for bit with
`nabla run` on the same inputs: TF Serving's status, metadata and predict (row and columnar),
the Open Inference Protocol's metadata, readiness and infer, hostile requests (malformed,
truncated and deeply nested JSON, huge numbers, wrong shapes and dtypes, a declared 1 GB body, a
client that leaves mid-request), concurrent requests, the metrics, and a graceful SIGTERM.
Exit status 77 (skipped) without torch.

Usage: serve_test.py NABLA_BINARY WORKDIR
       serve_test.py --models WORKDIR   (only writes the models and WORKDIR/models.json)
"""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np

try:
    import torch
except ImportError:
    print("SKIP: torch is not installed (Debian's python3-torch makes the ONNX models)")
    sys.exit(77)

NABLA, WORK = sys.argv[1], os.path.abspath(sys.argv[2])  # NABLA "--models": only make the models in WORK
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what, flush=True)


class Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 3)

    def forward(self, a, b):
        return self.l(a) * 1.5, a.sum(1, keepdim=True) + b


def make_models():
    os.makedirs(WORK, exist_ok=True)
    torch.manual_seed(0)
    for v in (1, 2):
        os.makedirs(f"{WORK}/two/{v}", exist_ok=True)
        torch.onnx.export(Two().eval(), (torch.randn(2, 4), torch.randn(2, 1)), f"{WORK}/two/{v}/model.onnx",
                          opset_version=17, input_names=["a", "b"], output_names=["y", "z"],
                          dynamic_axes={k: {0: "n"} for k in "abyz"})
    os.makedirs(f"{WORK}/one/1", exist_ok=True)
    one = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Tanh()).eval()
    torch.onnx.export(one, torch.randn(2, 3, 4), f"{WORK}/one/1/model.onnx", opset_version=17,
                      input_names=["x"], output_names=["out"], dynamic_axes={"x": {0: "n"}, "out": {0: "n"}})
    cfg = {"model_config_list": {"config": [
        {"name": "two", "base_path": f"{WORK}/two", "model_platform": "onnx", "model_version_policy": {"all": {}}},
        {"name": "one", "base_path": f"{WORK}/one"}]}}
    with open(f"{WORK}/models.json", "w") as f:
        json.dump(cfg, f)


def start(args):
    p = subprocess.Popen([NABLA, "serve", "--rest_api_port", "0"] + args, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    found = []

    def read():  # a thread: readline blocks, and select cannot see what the file object buffered
        for line in p.stdout:
            found.append(line)
            if "listening on http://" in line:
                return
    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(30)
    if found and "listening on http://" in found[-1]:
        return p, int(found[-1].split("listening on http://")[1].split()[0].rsplit(":", 1)[1])
    p.kill()
    raise SystemExit("the server did not start: %s %s" % ("".join(found), p.stderr.read()))


def request(port, method, path, body=None, headers=None):
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def call(port, method, path, body=None):
    status, text, _ = request(port, method, path, body)
    return status, json.loads(text)  # Python's json reads NaN and Infinity as TF Serving writes them


def reference(model, inputs, tag):
    """The outputs of `nabla run` on the same inputs, by name."""
    d = f"{WORK}/ref_{tag}"
    os.makedirs(d, exist_ok=True)
    args = [NABLA, "run", model, "--outputs", d]
    for i, x in enumerate(inputs):
        np.save(f"{d}/in{i}.npy", x)
        args += ["--input", f"{d}/in{i}.npy"]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return {f[:-4]: np.load(f"{d}/{f}") for f in os.listdir(d) if not f.startswith("in")}


def same_bits(got, want, what):
    got = np.asarray(got, dtype=np.float32)
    if got.shape != want.shape:
        check(False, f"{what}: shape {got.shape}, nabla run gives {want.shape}")
        return
    both_nan = np.isnan(got) & np.isnan(want)
    eq = (got.view(np.uint32) == want.view(np.uint32)) | both_nan
    check(bool(eq.all()), f"{what}: {int((~eq).sum())} of {eq.size} values differ from nabla run's bits")


def raw(port, data, read=True, timeout=10):
    """Sends bytes on a new connection; the status line's code (0 when the server closed first)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if not read:
            return None
        buf = b""
        while b"\r\n" not in buf:
            k = s.recv(4096)
            if not k:
                break
            buf += k
        return int(buf.split()[1]) if buf.startswith(b"HTTP/1.1") else 0
    except (ConnectionResetError, BrokenPipeError):
        return 0
    finally:
        s.close()


def main():
    os.makedirs(WORK, exist_ok=True)
    make_models()
    p, port = start(["--model_config_file", f"{WORK}/models.json", "--threads", "4", "--max_body_bytes", "1000000"])
    counts = {"two": 0, "two_err": 0, "one": 0, "one_err": 0}
    try:
        rng = np.random.default_rng(0)
        a = (rng.standard_normal((3, 4)) * np.array([1e-30, 1, 1e3, 3e37])).astype(np.float32)
        b = rng.standard_normal((3, 1)).astype(np.float32)
        b[2, 0] = np.inf
        a[1, 2] = np.nan
        ref2 = reference(f"{WORK}/two/2/model.onnx", [a, b], "two2")
        ref1 = reference(f"{WORK}/two/1/model.onnx", [a, b], "two1")
        check(not np.array_equal(ref1["y"], ref2["y"]), "the two versions' outputs differ")

        # TF Serving: status and metadata
        st, j = call(port, "GET", "/v1/models/two")
        vs = j.get("model_version_status", [])
        check(st == 200 and sorted(v["version"] for v in vs) == ["1", "2"], f"status of two: {st} {j}")
        check(all(v["state"] == "AVAILABLE" and v["status"]["error_code"] == "OK" for v in vs), "versions AVAILABLE, OK")
        st, j = call(port, "GET", "/v1/models/two/versions/1")
        check(st == 200 and [v["version"] for v in j["model_version_status"]] == ["1"], f"status of version 1: {j}")
        st, j = call(port, "GET", "/v1/models/two/metadata")
        sig = j["metadata"]["signature_def"]["signature_def"]["serving_default"]
        check(st == 200 and j["model_spec"] == {"name": "two", "signature_name": "", "version": "2"}, f"model_spec {j}")
        check(sig["inputs"]["a"]["dtype"] == "DT_FLOAT" and
              [d["size"] for d in sig["inputs"]["a"]["tensor_shape"]["dim"]] == ["-1", "4"], f"input a: {sig}")
        check(sorted(sig["outputs"]) == ["y", "z"] and
              [d["size"] for d in sig["outputs"]["y"]["tensor_shape"]["dim"]] == ["-1", "3"], f"outputs: {sig}")
        check(sig["method_name"] == "tensorflow/serving/predict", "method_name")

        # TF Serving: predict, row and columnar, two inputs and outputs, latest and a named version
        inst = [{"a": a[i].tolist(), "b": b[i].tolist()} for i in range(3)]
        st, j = call(port, "POST", "/v1/models/two:predict", json.dumps({"instances": inst}))
        counts["two"] += 1
        check(st == 200 and len(j.get("predictions", [])) == 3, f"row predict: {st} {j}")
        if st == 200:
            same_bits([r["y"] for r in j["predictions"]], ref2["y"], "row predict y (version 2)")
            same_bits([r["z"] for r in j["predictions"]], ref2["z"], "row predict z (version 2)")
        body = json.dumps({"signature_name": "serving_default", "inputs": {"a": a.tolist(), "b": b.tolist()}})
        st, j = call(port, "POST", "/v1/models/two/versions/1:predict", body)
        counts["two"] += 1
        check(st == 200 and sorted(j.get("outputs", {})) == ["y", "z"], f"columnar predict: {st} {j}")
        if st == 200:
            same_bits(j["outputs"]["y"], ref1["y"], "columnar predict y (version 1)")
            same_bits(j["outputs"]["z"], ref1["z"], "columnar predict z (version 1)")
        # one input, one output: bare values in both forms
        x = rng.standard_normal((2, 3, 4)).astype(np.float32)
        ref_one = reference(f"{WORK}/one/1/model.onnx", [x], "one")
        st, j = call(port, "POST", "/v1/models/one:predict", json.dumps({"instances": x.tolist()}))
        counts["one"] += 1
        check(st == 200, f"one row predict: {st} {j}")
        if st == 200:
            same_bits(j["predictions"], ref_one["out"], "one input, row")
        st, j = call(port, "POST", "/v1/models/one:predict", json.dumps({"inputs": x.tolist()}))
        counts["one"] += 1
        if st == 200:
            same_bits(j["outputs"], ref_one["out"], "one input, columnar")
        check(st == 200, f"one columnar predict: {st}")

        # Open Inference Protocol
        st, j = call(port, "GET", "/v2")
        check(st == 200 and j.get("name") == "nabla" and "version" in j and "extensions" in j, f"/v2: {j}")
        check(call(port, "GET", "/v2/health/live")[0] == 200, "live")
        check(call(port, "GET", "/v2/health/ready")[0] == 200, "ready")
        st, j = call(port, "GET", "/v2/models/two")
        check(st == 200 and j["name"] == "two" and j["versions"] == ["1", "2"] and j["platform"] == "onnx", f"v2 md {j}")
        check(j["inputs"] == [{"name": "a", "datatype": "FP32", "shape": [-1, 4]},
                              {"name": "b", "datatype": "FP32", "shape": [-1, 1]}], f"v2 inputs {j['inputs']}")
        check(call(port, "GET", "/v2/models/two/versions/1/ready")[0] == 200, "version 1 ready")
        body = {"id": "req-7", "inputs": [
            {"name": "a", "shape": [3, 4], "datatype": "FP32", "data": a.reshape(-1).tolist()},
            {"name": "b", "shape": [3, 1], "datatype": "FP32", "data": b.tolist()}]}
        st, j = call(port, "POST", "/v2/models/two/infer", json.dumps(body))
        counts["two"] += 1
        check(st == 200 and j.get("model_name") == "two" and j.get("model_version") == "2" and j.get("id") == "req-7",
              f"v2 infer: {st} {j}")
        if st == 200:
            outs = {o["name"]: o for o in j["outputs"]}
            check(outs["y"]["datatype"] == "FP32" and outs["y"]["shape"] == [3, 3], f"v2 output y {outs['y']}")
            same_bits(np.reshape(outs["y"]["data"], outs["y"]["shape"]), ref2["y"], "v2 infer y")
            same_bits(np.reshape(outs["z"]["data"], outs["z"]["shape"]), ref2["z"], "v2 infer z")
        body["outputs"] = [{"name": "z"}]
        st, j = call(port, "POST", "/v2/models/two/versions/1/infer", json.dumps(body))
        counts["two"] += 1
        check(st == 200 and [o["name"] for o in j.get("outputs", [])] == ["z"], f"v2 outputs filter: {j}")
        if st == 200:
            same_bits(np.reshape(j["outputs"][0]["data"], [3, 1]), ref1["z"], "v2 infer z (version 1)")

        # concurrent requests: every answer is the reference's
        errs = []

        def worker():
            for _ in range(5):
                s2, j2 = call(port, "POST", "/v1/models/two:predict", json.dumps({"inputs": {"a": a.tolist(), "b": b.tolist()}}))
                if s2 != 200:
                    errs.append(s2)
                    continue
                g = np.asarray(j2["outputs"]["y"], dtype=np.float32)
                if not ((g.view(np.uint32) == ref2["y"].view(np.uint32)) | (np.isnan(g) & np.isnan(ref2["y"]))).all():
                    errs.append("bits")
        ts = [threading.Thread(target=worker) for _ in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        counts["two"] += 30
        check(not errs, f"concurrent predicts: {errs}")

        # hostile and wrong requests: a JSON error with the right status, and the server keeps serving
        good_b = b.tolist()
        bad = [
            ("POST", "/v1/models/two:predict", '{"instances": [1, 2,}', 400, "malformed JSON"),
            ("POST", "/v1/models/two:predict", '{"inputs": {"a": [[1, 2', 400, "truncated JSON"),
            ("POST", "/v1/models/two:predict", '{"inputs": ' + "[" * 100000 + "]" * 100000 + "}", 400, "deep nesting"),
            ("POST", "/v1/models/one:predict", '{"inputs": ' + "[" * 12 + "1" + "]" * 12 + "}", 400, "nesting past 8 dims"),
            ("POST", "/v1/models/two:predict", json.dumps({"inputs": {"a": [[1e999, 2, 3, 4]], "b": [[1]]}}).replace("Infinity", "1e999"), 400, "huge float"),
            ("POST", "/v1/models/two:predict", '{"inputs": {"a": [[123456789012345678901234567890, 2, 3, 4]], "b": [[1]]}}', 400, "huge integer"),
            ("POST", "/v1/models/two:predict", json.dumps({"inputs": {"a": [[1, 2, 3]], "b": [[1]]}}), 400, "wrong shape"),
            ("POST", "/v1/models/two:predict", json.dumps({"inputs": {"a": [[1, 2], [3]], "b": [[1]]}}), 400, "ragged list"),
            ("POST", "/v1/models/two:predict", json.dumps({"inputs": {"a": [["x", 2, 3, 4]], "b": [[1]]}}), 400, "string in a float tensor"),
            ("POST", "/v1/models/two:predict", json.dumps({"inputs": {"a": a.tolist(), "b": good_b}, "instances": inst}), 400, "both formats"),
            ("POST", "/v1/models/two:predict", json.dumps({"signature_name": "other", "inputs": {"a": a.tolist(), "b": good_b}}), 400, "unknown signature"),
            ("POST", "/v1/models/two:predict", "{}", 400, "neither format"),
            ("POST", "/v1/models/two:predict", json.dumps({"instances": [inst[0], [1, 2, 3, 4]]}), 400, "mixed instances"),
            ("POST", "/v1/models/two:predict", json.dumps({"instances": [{"a": [1, 2, 3, 4]}]}), 400, "missing input"),
            ("POST", "/v1/models/two:predict", json.dumps({"inputs": {"a": a.tolist(), "b": good_b, "c": 1}}), 400, "unknown input"),
            ("POST", "/v1/models/two:predict", "[1, 2]", 400, "body not an object"),
            ("POST", "/v2/models/two/infer", json.dumps({"inputs": [{"name": "a", "shape": [1, 4], "datatype": "INT32", "data": [1, 2, 3, 4]}]}), 400, "v2 wrong datatype"),
            ("POST", "/v2/models/two/infer", json.dumps({"inputs": [{"name": "a", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3]}, {"name": "b", "shape": [1, 1], "datatype": "FP32", "data": [1]}]}), 400, "v2 data shorter than shape"),
            ("POST", "/v2/models/two/infer", json.dumps({"inputs": [{"name": "a", "shape": [4611686018427387904, 4], "datatype": "FP32", "data": [1]}]}), 400, "v2 shape overflow"),
            ("POST", "/v2/models/two/infer", json.dumps({"inputs": [{"name": "a", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}), 400, "v2 missing input"),
            ("POST", "/v2/models/two/infer", json.dumps({"inputs": [{"name": "a", "shape": [1, 4], "datatype": "STRING", "data": [1, 2, 3, 4]}]}), 400, "v2 unknown datatype"),
            ("POST", "/v2/models/two/infer", json.dumps({"inputs": {"a": 1}}), 400, "v2 inputs not a list"),
            ("POST", "/v1/models/nosuch:predict", "{}", 404, "unknown model"),
            ("POST", "/v1/models/two/versions/9:predict", "{}", 404, "unknown version"),
            ("GET", "/v1/models/two/versions/x", None, 400, "version not a number"),
            ("GET", "/v2/models/nosuch", None, 404, "v2 unknown model"),
            ("GET", "/v2/models/two/versions/9/ready", None, 404, "v2 unknown version"),
            ("GET", "/v1/models/two:predict", None, 405, "GET on predict"),
            ("POST", "/v1/models/two", "{}", 405, "POST on status"),
            ("GET", "/nothing/here", None, 404, "unknown path"),
            ("POST", "/v1/models/two:classify", "{}", 501, "classify not built"),
        ]
        for method, path, body, want, what in bad:
            st, text, hdr = request(port, method, path, body)
            try:
                ok_json = isinstance(json.loads(text).get("error"), str)
            except ValueError:
                ok_json = False
            check(st == want and ok_json, f"{what}: {st} (want {want}) {text[:200]}")
            if want == 405:
                check("Allow" in hdr, f"{what}: no Allow header")
            # the per-model counters take the inference requests that reached a version
            for name in ("two", "one"):
                if method == "POST" and want not in (404, 405, 501) and (
                        path.startswith(f"/v1/models/{name}") or path.startswith(f"/v2/models/{name}/")):
                    counts[name] += 1
                    counts[name + "_err"] += 1
        # a declared 1 GB body is refused before it is read
        code = raw(port, b"POST /v1/models/two:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n")
        check(code == 413, f"1 GB Content-Length: {code}")
        # a chunked body past the limit: 413 or the connection dropped, never a model run
        chunk = b"%x\r\n" % 600000 + b"[" * 600000 + b"\r\n"
        try:
            code = raw(port, b"POST /v1/models/two:predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk * 2)
        except OSError:
            code = 0
        check(code in (0, 413), f"chunked body past the limit: {code}")
        # headers past the limit
        code = raw(port, b"GET /v2 HTTP/1.1\r\nHost: x\r\nX-Big: " + b"y" * 100000 + b"\r\n\r\n")
        check(code in (0, 413, 431), f"100 kB header: {code}")
        # a client that sends half a body and leaves
        raw(port, b"POST /v1/models/two:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"inputs\"", read=False)
        st, j = call(port, "GET", "/v1/models/two")
        check(st == 200, "the server still answers after the hostile requests")

        # metrics
        st, text, hdr = request(port, "GET", "/monitoring/prometheus/metrics")
        check(st == 200 and hdr.get("Content-Type", "").startswith("text/plain"), f"metrics: {st} {hdr}")
        m = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                m[k] = float(v)
        check(m.get("nabla_serve_models_loaded") == 3, f"models_loaded {m.get('nabla_serve_models_loaded')}")
        req_two, err_two = 'nabla_serve_requests_total{model="two"}', 'nabla_serve_request_errors_total{model="two"}'
        check(m.get(req_two) == counts["two"], f"requests of two: {m.get(req_two)}, want {counts['two']}")
        check(m.get(err_two) == counts["two_err"], f"errors of two: {m.get(err_two)}, want {counts['two_err']}")
        check(m.get('nabla_serve_requests_total{model="one"}') == counts["one"], "requests of one")
        check(m.get('nabla_serve_request_errors_total{model="one"}') == counts["one_err"], "errors of one")
        check(m.get('nabla_serve_request_duration_seconds_count{model="two"}') == counts["two"] and
              m.get('nabla_serve_request_duration_seconds_bucket{model="two",le="+Inf"}') == counts["two"], "histogram count")

        # graceful stop: a request whose body is still arriving when SIGTERM comes is answered in full
        body = json.dumps({"inputs": {"a": a.tolist(), "b": b.tolist()}}).encode()
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"POST /v1/models/two:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:20])
        # and a client stalled mid-body does not hold the stop up (it waited for the idle timeout)
        stalled = socket.create_connection(("127.0.0.1", port), timeout=10)
        stalled.sendall(b"POST /v1/models/two:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{")
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        t_term = time.time()
        time.sleep(0.5)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            check(False, "a new connection was taken after SIGTERM")
        except OSError:
            pass
        s.sendall(body[20:])
        resp = b""
        while True:
            k = s.recv(65536)
            if not k:
                break
            resp += k
        s.close()
        check(resp.startswith(b"HTTP/1.1 200"), f"the request in flight at SIGTERM: {resp[:100]}")
        if resp.startswith(b"HTTP/1.1 200"):
            j = json.loads(resp.split(b"\r\n\r\n", 1)[1])
            same_bits(j["outputs"]["y"], ref2["y"], "the request in flight at SIGTERM")
        try:
            rc = p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "none: still running 20 s after SIGTERM"
        stalled.close()
        check(rc == 0, f"exit status after SIGTERM: {rc} {p.stderr.read()}")
        check(time.time() - t_term < 8, f"the stop took {time.time() - t_term:.1f} s with a client stalled mid-body")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()

    # one model from the command line, stopped by SIGINT
    p, port = start(["--model_name", "one", "--model_base_path", f"{WORK}/one"])
    st, j = call(port, "GET", "/v1/models/one")
    check(st == 200 and j["model_version_status"][0]["version"] == "1", f"single model status {j}")
    p.send_signal(signal.SIGINT)
    check(p.wait(timeout=20) == 0, "exit status after SIGINT")
    r = subprocess.run([NABLA, "serve", "--help"], capture_output=True, text=True)
    check(r.returncode == 0 and "--model_base_path" in r.stdout and "/v2/" in r.stdout, "nabla serve --help")
    r = subprocess.run([NABLA, "serve", "--model_name", "x"], capture_output=True, text=True)
    check(r.returncode == 2 and "--model_base_path" in r.stderr, f"a missing flag: {r.returncode} {r.stderr}")
    r = subprocess.run([NABLA, "serve", "--model_name", "x", "--model_base_path", f"{WORK}/nothing", "--rest_api_port", "0"],
                       capture_output=True, text=True, timeout=20)
    check(r.returncode == 1 and f"{WORK}/nothing" in r.stderr, f"a missing base path: {r.returncode} {r.stderr}")

    if failures:
        print(f"{len(failures)} checks failed")
        sys.exit(1)
    print("every serving check passed")


if NABLA == "--models":
    make_models()
else:
    main()
