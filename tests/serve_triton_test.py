"""NVIDIA Triton's HTTP client (tritonclient[http], pinned in scripts/triton_requirements.txt)
against nabla serve: server and model liveness and readiness, model metadata, and infer with
JSON tensors (binary_data=False: the binary extension is not built), every output compared bit
for bit with `nabla run` on the same inputs. Runs on the environment of scripts/triton_env.sh;
the models come from tests/serve_test.py --models (Debian's PyTorch).

Usage: serve_triton_test.py NABLA_BINARY WORKDIR (WORKDIR holds models.json and the models)
"""
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import tritonclient.http as httpclient

NABLA, WORK = sys.argv[1], os.path.abspath(sys.argv[2])
p = subprocess.Popen([NABLA, "serve", "--rest_api_port", "0", "--model_config_file", f"{WORK}/models.json"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
lines = []


def read():
    for line in p.stdout:
        lines.append(line)
        if "listening on http://" in line:
            return


t = threading.Thread(target=read, daemon=True)
t.start()
t.join(30)
if not lines or "listening on http://" not in lines[-1]:
    p.kill()
    sys.exit("the server did not start: " + "".join(lines) + p.stderr.read())
port = int(lines[-1].split("listening on http://")[1].split()[0].rsplit(":", 1)[1])
failures = []
try:
    c = httpclient.InferenceServerClient(url=f"127.0.0.1:{port}")
    if not (c.is_server_live() and c.is_server_ready() and c.is_model_ready("two") and c.is_model_ready("two", "1")):
        failures.append("live/ready")
    md = c.get_model_metadata("two")
    if [(i["name"], i["datatype"], i["shape"]) for i in md["inputs"]] != [("a", "FP32", [-1, 4]), ("b", "FP32", [-1, 1])]:
        failures.append(f"metadata {md}")
    sm = c.get_server_metadata()
    if sm.get("name") != "nabla":
        failures.append(f"server metadata {sm}")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 4)).astype(np.float32)
    b = rng.standard_normal((5, 1)).astype(np.float32)
    ins = [httpclient.InferInput("a", list(a.shape), "FP32"), httpclient.InferInput("b", list(b.shape), "FP32")]
    ins[0].set_data_from_numpy(a, binary_data=False)
    ins[1].set_data_from_numpy(b, binary_data=False)
    outs = [httpclient.InferRequestedOutput("y", binary_data=False), httpclient.InferRequestedOutput("z", binary_data=False)]
    for version, ref_model in (("", "two/2"), ("1", "two/1")):
        r = c.infer("two", ins, model_version=version, outputs=outs, request_id="t-1")
        d = f"{WORK}/triton_ref_{version or 'latest'}"
        os.makedirs(d, exist_ok=True)
        np.save(f"{d}/a.npy", a)
        np.save(f"{d}/b.npy", b)
        subprocess.run([NABLA, "run", f"{WORK}/{ref_model}/model.onnx", "--input", f"{d}/a.npy", "--input", f"{d}/b.npy",
                        "--outputs", d], check=True, stdout=subprocess.DEVNULL)
        for name in ("y", "z"):
            got, want = r.as_numpy(name), np.load(f"{d}/{name}.npy")
            if got is None or got.dtype != np.float32 or got.shape != want.shape or \
                    not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                failures.append(f"infer {name} (version '{version}'): {got} vs {want}")
        if r.get_response().get("id") != "t-1":
            failures.append(f"id not echoed: {r.get_response()}")
    try:
        c.infer("nosuch", ins)
        failures.append("an unknown model was answered")
    except Exception as e:  # tritonclient raises InferenceServerException with the server's message
        if "nosuch" not in str(e):
            failures.append(f"unknown model's error: {e}")
finally:
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=30)
if rc != 0:
    failures.append(f"exit status {rc}")
for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print("tritonclient checks passed")
