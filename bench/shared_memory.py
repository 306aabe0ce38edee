#!/usr/bin/python3
"""What a 600 KB tensor costs through the agent, sent in the HTTP body or referenced in shared
memory (the system shared-memory extension), against a tiny request and the HTTP floor.

One agent serves tiny_mlp (16 floats in, 8 out) and image_probe (one 3x224x224 FP32 image,
602 KB, in; 8 floats out; next to no compute), each on one one-thread runtime with batches of
one. One client on one keep-alive connection sends, round-robin so that every case sees the same
machine state:
  floor       GET /v2/health/live
  tiny        tiny_mlp, binary tensor extension in and out
  image-body  image_probe, the image in the body (binary tensor extension)
  image-shm   image_probe, the image and the output in a registered region (references only)
Prints one Markdown row per case (p50, p99, p50 above `tiny`), then lscpu's model name.

    /usr/bin/python3 bench/shared_memory.py [--requests N] [--agent build/bin/packrat-agent]
"""
import argparse
import http.client
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
from multiprocessing import shared_memory

IMAGE_BYTES = 3 * 224 * 224 * 4


def start_agent(agent, models, folder):
    config = os.path.join(folder, "config.yaml")
    with open(config, "w") as f:
        f.write("server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, "
                "grpc: off}\nmodels:\n")
        for name, path, shape in (("tiny", "tiny_mlp.pt", "[-1, 16]"),
                                  ("probe", "image_probe.pt", "[-1, 3, 224, 224]")):
            out = "[-1, 8]"
            f.write(f"  - name: {name}\n    path: {models}/{path}\n"
                    f"    inputs: [{{name: x, datatype: FP32, shape: {shape}}}]\n"
                    f"    outputs: [{{name: y, datatype: FP32, shape: {out}}}]\n"
                    "    batching: {max_batch: 1, max_delay_us: 0}\n"
                    "    instances: [{count: 1, threads: 1, batch: 1}]\n")
    ports = os.path.join(folder, "ports.json")
    log = open(os.path.join(folder, "agent.log"), "w")
    proc = subprocess.Popen([agent, "--config", config, "--port-file", ports], stderr=log,
                            stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        with open(os.path.join(folder, "agent.log")) as f:
            if "models loaded" in f.read():
                with open(ports) as p:
                    return proc, json.load(p)["http"]
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("the agent did not start: see " + os.path.join(folder, "agent.log"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=2000, help="per case")
    ap.add_argument("--agent", default="build/bin/packrat-agent")
    ap.add_argument("--models", default="models")
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="packrat-shm-bench")
    memory = shared_memory.SharedMemory(create=True, size=IMAGE_BYTES + 4096)
    proc, port = start_agent(os.path.abspath(args.agent), os.path.abspath(args.models), folder)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

        def call(method, path, body=None, headers=None):
            start = time.perf_counter_ns()
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            answer = r.read()
            elapsed = (time.perf_counter_ns() - start) / 1000
            if r.status != 200:
                raise SystemExit(f"{path}: {r.status} {answer[:200]!r}")
            return elapsed

        def binary(model, shape, data):
            header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": shape,
                                             "parameters": {"binary_data_size": len(data)}}],
                                 "parameters": {"binary_data_output": True}}).encode()
            return (header + data, {"Inference-Header-Content-Length": str(len(header)),
                                    "Content-Type": "application/octet-stream"})

        tiny_body, tiny_headers = binary("tiny", [1, 16], bytes(64))
        image = os.urandom(IMAGE_BYTES)
        image_body, image_headers = binary("probe", [1, 3, 224, 224], image)
        memory.buf[:IMAGE_BYTES] = image
        key = "/" + memory.name
        call("POST", "/v2/systemsharedmemory/region/in/register",
             json.dumps({"key": key, "offset": 0, "byte_size": IMAGE_BYTES}))
        call("POST", "/v2/systemsharedmemory/region/out/register",
             json.dumps({"key": key, "offset": IMAGE_BYTES, "byte_size": 4096}))
        shm_body = json.dumps({
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3, 224, 224],
                        "parameters": {"shared_memory_region": "in",
                                       "shared_memory_byte_size": IMAGE_BYTES}}],
            "outputs": [{"name": "y", "parameters": {"shared_memory_region": "out",
                                                     "shared_memory_byte_size": 32}}]})
        cases = {
            "floor": lambda: call("GET", "/v2/health/live"),
            "tiny": lambda: call("POST", "/v2/models/tiny/infer", tiny_body, tiny_headers),
            "image-body": lambda: call("POST", "/v2/models/probe/infer", image_body,
                                       image_headers),
            "image-shm": lambda: call("POST", "/v2/models/probe/infer", shm_body,
                                      {"Content-Type": "application/json"}),
        }
        times = {name: [] for name in cases}
        for _ in range(50):  # warm-up
            for run in cases.values():
                run()
        for _ in range(args.requests):
            for name, run in cases.items():
                times[name].append(run())
        # The output landed in the client's region: image[0, 0, 0, :8] * 2.
        got = struct.unpack("<8f", bytes(memory.buf[IMAGE_BYTES:IMAGE_BYTES + 32]))
        want = [2 * v for v in struct.unpack("<8f", image[:32])]
        if any(abs(a - b) > 1e-6 * max(1.0, abs(b)) for a, b in zip(got, want)):
            raise SystemExit(f"wrong output in shared memory: {got} != {want}")

        def quantile(values, q):
            values = sorted(values)
            return values[min(len(values) - 1, int(q * len(values)))]

        tiny_p50 = quantile(times["tiny"], 0.5)
        print("| case | p50 µs | p99 µs | p50 above tiny µs |")
        print("|---|---:|---:|---:|")
        for name, values in times.items():
            p50 = quantile(values, 0.5)
            print(f"| {name} | {p50:.0f} | {quantile(values, 0.99):.0f} | "
                  f"{p50 - tiny_p50:+.0f} |")
        model = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        print(next((l.strip() for l in model.splitlines() if "Model name" in l), ""))
    finally:
        proc.terminate()
        proc.wait(60)
        memory.close()
        memory.unlink()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
