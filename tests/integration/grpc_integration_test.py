#!/usr/bin/python3
"""The agent's KServe v2 gRPC front end against a real agent, with an independent client.

The client is Python grpcio with stubs generated from agent/grpc/grpc_service.proto at test time
(protoc --python_out + /usr/bin/grpc_python_plugin, into a temporary folder). Each RPC is
called; tensors sent raw and typed are compared with the same request over REST (JSON and the
binary extension); tensors in the client's shared memory (the system shared-memory
extension, over REST and gRPC); the errors map as docs/operations.md says; a gRPC and a REST request are
shown to share one batch (the model's batch-size histogram); the queue-full, deadline and
shutdown paths are driven deterministically (a batch that waits for rows that never come, and
the queue-rows gauge polled until the request is queued).

Run with Debian's interpreter (it has python3-grpcio; the python3 on PATH may not):

    /usr/bin/python3 tests/integration/grpc_integration_test.py \
        --agent build/bin/packrat-agent --models models --proto agent/grpc/grpc_service.proto

CTest: grpc_integration.
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from multiprocessing import shared_memory

import grpc

ARGS = None  # set by main()
pb = None  # grpc_service_pb2, generated in main()
pb_grpc = None  # grpc_service_pb2_grpc

START_TIMEOUT_S = 180
CALL_TIMEOUT_S = 30


def generate_stubs(proto, out_dir):
    """Compiles `proto` into Python messages and stubs in `out_dir` and imports them."""
    global pb, pb_grpc
    protoc = shutil.which("protoc") or "/usr/bin/protoc"
    subprocess.run([protoc, "-I" + os.path.dirname(os.path.abspath(proto)),
                    "--python_out=" + out_dir, "--grpc_out=" + out_dir,
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
                    os.path.abspath(proto)], check=True)
    sys.path.insert(0, out_dir)
    import grpc_service_pb2  # noqa: E402 (generated above)
    import grpc_service_pb2_grpc  # noqa: E402
    pb, pb_grpc = grpc_service_pb2, grpc_service_pb2_grpc


def poll(condition, timeout_s=30, what="condition"):
    """Returns condition()'s first truthy value, checking until `timeout_s` passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)


class Agent:
    """A packrat-agent process on a config in a temporary folder; its stderr is collected."""

    def __init__(self, config):
        self.dir = tempfile.mkdtemp(prefix="packrat-grpc-test")
        with open(os.path.join(self.dir, "config.yaml"), "w") as f:
            f.write(config)
        self.lines = []
        self.cv = threading.Condition()
        env = dict(os.environ, PACKRAT_LOG_LEVEL="INFO")
        self.proc = subprocess.Popen(
            [ARGS.agent, "--config", os.path.join(self.dir, "config.yaml"),
             "--port-file", os.path.join(self.dir, "ports.json")],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.ports = {}

    def _read(self):
        for line in self.proc.stderr:
            with self.cv:
                self.lines.append(line.rstrip("\n"))
                self.cv.notify_all()
        with self.cv:
            self.lines.append(None)  # end of log
            self.cv.notify_all()

    def wait_log(self, needle, timeout_s=START_TIMEOUT_S):
        deadline = time.monotonic() + timeout_s
        with self.cv:
            seen = 0
            while True:
                for line in self.lines[seen:]:
                    if line is None:
                        return False
                    if needle in line:
                        return True
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or not self.cv.wait(left):
                    return False

    def wait_serving(self):
        if not self.wait_log("models loaded"):
            raise AssertionError("the agent did not start:\n" + self.log())
        with open(os.path.join(self.dir, "ports.json")) as f:
            self.ports = json.load(f)
        if "grpc" not in self.ports:
            raise AssertionError("no grpc port in ports.json: " + json.dumps(self.ports))

    def log(self):
        with self.cv:
            return "\n".join(l for l in self.lines[-80:] if l is not None)

    def stop(self, sig=signal.SIGTERM, timeout_s=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.reader.join(5)
            self.proc.stderr.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    # Clients.
    def stub(self):
        channel = grpc.insecure_channel("127.0.0.1:%d" % self.ports["grpc"])
        return pb_grpc.GRPCInferenceServiceStub(channel)

    def rest(self, method, path, body=None, headers=None, port="http"):
        conn = http.client.HTTPConnection("127.0.0.1", self.ports[port], timeout=CALL_TIMEOUT_S)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
        finally:
            conn.close()

    def metrics(self):
        return self.rest("GET", "/metrics", port="metrics")[2].decode()

    def metric(self, name, **labels):
        """The value of one series in /metrics, or 0.0 if it is not there (yet)."""
        want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
        for line in self.metrics().splitlines():
            m = re.match(r"^(\w+)\{([^}]*)\} (\S+)$", line)
            if m and m.group(1) == name and m.group(2) == want:
                return float(m.group(3))
        return 0.0


def tiny_model(name, batching, instances="[{count: 1, threads: 1, batch: 4}]"):
    return ("  - name: %s\n    path: %s/tiny_mlp.pt\n"
            "    inputs: [{name: x, datatype: FP32, shape: [-1, 16]}]\n"
            "    outputs: [{name: y, datatype: FP32, shape: [-1, 8]}]\n"
            "    batching: %s\n    instances: %s\n    warmup_iterations: 1\n"
            % (name, ARGS.models, batching, instances))


def floats(n, rng):
    """n float32-exact values (k/16), so JSON and raw bytes carry the same numbers."""
    return [rng.randint(-64, 64) / 16 for _ in range(n)]


def infer_request(model, inputs, raw=True, outputs=(), parameters=None, request_id=""):
    """inputs: [(name, datatype, shape, values)]; FP32 or INT64 values."""
    req = pb.ModelInferRequest(model_name=model, id=request_id)
    for name, datatype, shape, values in inputs:
        t = req.inputs.add(name=name, datatype=datatype, shape=shape)
        fmt = {"FP32": "f", "INT64": "q"}[datatype]
        if raw:
            req.raw_input_contents.append(struct.pack("<%d%s" % (len(values), fmt), *values))
        elif datatype == "FP32":
            t.contents.fp32_contents.extend(values)
        else:
            t.contents.int64_contents.extend(values)
    for name in outputs:
        req.outputs.add(name=name)
    for key, value in (parameters or {}).items():
        req.parameters[key].int64_param = value
    return req


def rest_json(inputs, outputs=()):
    body = {"inputs": [{"name": n, "datatype": d, "shape": s, "data": v}
                       for n, d, s, v in inputs]}
    if outputs:
        body["outputs"] = [{"name": n} for n in outputs]
    return json.dumps(body)


def rest_binary(inputs):
    """The binary tensor extension: JSON header, then raw bytes; binary outputs."""
    header = {"inputs": [], "parameters": {"binary_data_output": True}}
    tail = b""
    for name, datatype, shape, values in inputs:
        fmt = {"FP32": "f", "INT64": "q"}[datatype]
        data = struct.pack("<%d%s" % (len(values), fmt), *values)
        header["inputs"].append({"name": name, "datatype": datatype, "shape": shape,
                                 "parameters": {"binary_data_size": len(data)}})
        tail += data
    head = json.dumps(header).encode()
    return head + tail, {"Inference-Header-Content-Length": str(len(head))}


def raw_of_json_output(output):
    fmt = {"FP32": "f", "INT64": "q"}[output["datatype"]]
    return struct.pack("<%d%s" % (len(output["data"]), fmt), *output["data"])


def code_of(call):
    """The gRPC status code and details of a call expected to fail."""
    try:
        call()
    except grpc.RpcError as e:
        return e.code(), e.details()
    raise AssertionError("the call succeeded")


class GrpcAgainstRealAgentTest(unittest.TestCase):
    """One agent serving: tiny (tiny_mlp), two_head (two inputs and outputs, INT64), pair (a
    batch of exactly 2 rows, else it waits 60 s), held (a queue of 1 row whose batch never
    fills) and broken (a file that is not a model, which lenient readiness serves on without)."""

    @classmethod
    def setUpClass(cls):
        config = ("server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, "
                  "grpc: 127.0.0.1:0, strict_readiness: false}\nmodels:\n"
                  + tiny_model("tiny", "{max_batch: 8, max_delay_us: 500}")
                  + "  - name: two_head\n    path: %s/two_head.pt\n"
                    "    inputs: [{name: x, datatype: FP32, shape: [-1, 8]},\n"
                    "             {name: ids, datatype: INT64, shape: [-1, 4]}]\n"
                    "    outputs: [{name: scores, datatype: FP32, shape: [-1, 5]},\n"
                    "              {name: best, datatype: INT64, shape: [-1]}]\n"
                    "    batching: {max_batch: 8, max_delay_us: 500}\n"
                    "    instances: [{count: 1, threads: 1, batch: 4}]\n"
                    "    warmup_iterations: 1\n" % ARGS.models
                  + tiny_model("pair", "{max_batch: 2, max_delay_us: 60000000}",
                               "[{count: 1, threads: 1, batch: 2}]")
                  + tiny_model("held", "{max_batch: 4, max_delay_us: 60000000, "
                                       "max_queue_rows: 1}")
                  + "  - name: broken\n    path: %s/not_a_model.pt\n"
                    "    inputs: [{name: x, datatype: FP32, shape: [-1, 4]}]\n"
                    "    outputs: [{name: y, datatype: FP32, shape: [-1, 4]}]\n"
                    "    instances: [{count: 1, threads: 1, batch: 1}]\n" % ARGS.models)
        cls.agent = Agent(config)
        try:
            cls.agent.wait_serving()
        except Exception:
            cls.agent.stop(signal.SIGKILL)
            raise
        cls.stub = cls.agent.stub()
        cls.rng = random.Random(7)

    @classmethod
    def tearDownClass(cls):
        status = cls.agent.stop()
        assert status == 0, "agent exit status %s" % status

    def test_health_and_metadata(self):
        s = self.stub
        self.assertTrue(s.ServerLive(pb.ServerLiveRequest(), timeout=CALL_TIMEOUT_S).live)
        # `broken` failed to load: lenient readiness serves on without it, as REST says.
        self.assertTrue(s.ServerReady(pb.ServerReadyRequest(), timeout=CALL_TIMEOUT_S).ready)
        self.assertEqual(self.agent.rest("GET", "/v2/health/ready")[0], 200)
        self.assertTrue(s.ModelReady(pb.ModelReadyRequest(name="tiny"), timeout=CALL_TIMEOUT_S).ready)
        self.assertTrue(s.ModelReady(pb.ModelReadyRequest(name="tiny", version="1")).ready)
        self.assertFalse(s.ModelReady(pb.ModelReadyRequest(name="broken")).ready)
        self.assertEqual(code_of(lambda: s.ModelReady(pb.ModelReadyRequest(name="nope"))),
                         (grpc.StatusCode.NOT_FOUND, "unknown model 'nope'"))

        meta = s.ServerMetadata(pb.ServerMetadataRequest())
        rest_meta = json.loads(self.agent.rest("GET", "/v2")[2])
        self.assertEqual((meta.name, meta.version), (rest_meta["name"], rest_meta["version"]))
        self.assertIn("model_repository", meta.extensions)

        model = s.ModelMetadata(pb.ModelMetadataRequest(name="two_head"))
        rest_model = json.loads(self.agent.rest("GET", "/v2/models/two_head")[2])
        self.assertEqual(model.name, rest_model["name"])
        self.assertEqual(list(model.versions), rest_model["versions"])
        self.assertEqual(model.platform, rest_model["platform"])
        for ours, theirs in ((model.inputs, rest_model["inputs"]),
                             (model.outputs, rest_model["outputs"])):
            self.assertEqual([(t.name, t.datatype, list(t.shape)) for t in ours],
                             [(t["name"], t["datatype"], t["shape"]) for t in theirs])
        self.assertEqual(model.properties["state"], "READY")
        broken = s.ModelMetadata(pb.ModelMetadataRequest(name="broken"))
        self.assertEqual(broken.properties["state"], "FAILED")
        self.assertIn("cannot load TorchScript model", broken.properties["reason"])
        self.assertEqual(code_of(lambda: s.ModelMetadata(pb.ModelMetadataRequest(name="nope")))[0],
                         grpc.StatusCode.NOT_FOUND)

    def test_raw_and_typed_tensors_match_rest(self):
        x = floats(3 * 16, self.rng)
        inputs = [("x", "FP32", [3, 16], x)]
        status, _, body = self.agent.rest("POST", "/v2/models/tiny/infer", rest_json(inputs))
        self.assertEqual(status, 200, body)
        rest_out = json.loads(body)["outputs"][0]
        binary_body, headers = rest_binary(inputs)
        status, rheaders, body = self.agent.rest("POST", "/v2/models/tiny/infer", binary_body,
                                                 headers)
        self.assertEqual(status, 200, body)
        header_length = int(rheaders["inference-header-content-length"])
        binary_out = body[header_length:]

        for raw in (True, False):
            r = self.stub.ModelInfer(infer_request("tiny", inputs, raw=raw, request_id="r1"),
                                     timeout=CALL_TIMEOUT_S)
            self.assertEqual((r.model_name, r.model_version, r.id), ("tiny", "1", "r1"))
            self.assertEqual([(o.name, o.datatype, list(o.shape)) for o in r.outputs],
                             [("y", "FP32", [3, 8])])
            self.assertEqual(len(r.raw_output_contents), 1)  # always raw, one per output
            self.assertFalse(r.outputs[0].HasField("contents"))
            self.assertEqual(r.raw_output_contents[0], raw_of_json_output(rest_out))
            self.assertEqual(r.raw_output_contents[0], binary_out)

        # Two inputs, INT64 in and out; typed ids with raw x (KServe's client mixes them).
        ids = [self.rng.randint(0, 99) for _ in range(2 * 4)]
        inputs = [("x", "FP32", [2, 8], floats(2 * 8, self.rng)), ("ids", "INT64", [2, 4], ids)]
        status, _, body = self.agent.rest("POST", "/v2/models/two_head/infer", rest_json(inputs))
        self.assertEqual(status, 200, body)
        rest_outs = {o["name"]: o for o in json.loads(body)["outputs"]}
        mixed = infer_request("two_head", inputs[:1], raw=True)
        mixed.inputs.add(name="ids", datatype="INT64", shape=[2, 4]).contents.int64_contents.extend(ids)
        for req in (infer_request("two_head", inputs, raw=True),
                    infer_request("two_head", inputs, raw=False), mixed):
            r = self.stub.ModelInfer(req, timeout=CALL_TIMEOUT_S)
            self.assertEqual(len(r.outputs), len(r.raw_output_contents))
            got = {o.name: r.raw_output_contents[i] for i, o in enumerate(r.outputs)}
            self.assertEqual(set(got), {"scores", "best"})
            for name, raw in got.items():
                self.assertEqual(raw, raw_of_json_output(rest_outs[name]), name)
        # Only the outputs asked for.
        r = self.stub.ModelInfer(infer_request("two_head", inputs, outputs=["best"]))
        self.assertEqual([o.name for o in r.outputs], ["best"])
        self.assertEqual(r.raw_output_contents[0], raw_of_json_output(rest_outs["best"]))

    def test_errors_map_as_rest_does(self):
        s = self.stub
        x = floats(16, self.rng)
        self.assertEqual(code_of(lambda: s.ModelInfer(infer_request("nope", [("x", "FP32", [1, 16], x)]))),
                         (grpc.StatusCode.NOT_FOUND, "unknown model 'nope'"))
        # Bad shape / datatype: INVALID_ARGUMENT with REST's message (400) word for word.
        for inputs in ([("x", "FP32", [2, 8], x)], [("x", "INT64", [1, 16], [1] * 16)],
                       [("y", "FP32", [1, 16], x)]):
            code, details = code_of(lambda: s.ModelInfer(infer_request("tiny", inputs)))
            status, _, body = self.agent.rest("POST", "/v2/models/tiny/infer", rest_json(inputs))
            self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertEqual(status, 400)
            self.assertEqual(details, json.loads(body)["error"])
        code, details = code_of(lambda: s.ModelInfer(infer_request("tiny", [("x", "FP32", [1, 16], x[:15])])))
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("raw_input_contents[0] has 60 bytes", details)
        # Not ready: UNAVAILABLE (REST 503).
        self.assertEqual(code_of(lambda: s.ModelInfer(infer_request("broken", [("x", "FP32", [1, 4], x[:4])]))),
                         (grpc.StatusCode.UNAVAILABLE, "model 'broken' is not ready"))
        # A message over grpc_max_message_bytes (64 MiB by default): gRPC's RESOURCE_EXHAUSTED.
        channel = grpc.insecure_channel("127.0.0.1:%d" % self.agent.ports["grpc"],
                                        options=[("grpc.max_send_message_length", -1)])
        big = infer_request("tiny", [("x", "FP32", [1, 16], x)])
        big.raw_input_contents[0] = b"\0" * (65 << 20)
        self.assertEqual(code_of(lambda: pb_grpc.GRPCInferenceServiceStub(channel).ModelInfer(big))[0],
                         grpc.StatusCode.RESOURCE_EXHAUSTED)
        channel.close()

    def test_queue_full_and_deadlines(self):
        """`held` queues 1 row and waits 60 s for a batch of 4."""
        a = self.agent
        x = floats(16, self.rng)
        one = [("x", "FP32", [1, 16], x)]
        before_429 = a.metric("packrat_requests_total", code="429", model="held")
        before_504 = a.metric("packrat_requests_total", code="504", model="held")
        # The request's own timeout (µs): answered DEADLINE_EXCEEDED by the server, never run.
        first = self.stub.ModelInfer.future(infer_request("held", one, parameters={"timeout": 3_000_000}),
                                            timeout=CALL_TIMEOUT_S)
        poll(lambda: a.metric("packrat_queue_rows", model="held") == 1, what="the queued row")
        # Queue full: RESOURCE_EXHAUSTED at once (REST's 429).
        code, details = code_of(lambda: self.stub.ModelInfer(infer_request("held", one),
                                                             timeout=CALL_TIMEOUT_S))
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("queue is full", details)
        e = first.exception()
        self.assertEqual(e.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertIn("timed out", e.details())  # the server's answer, not the client's deadline
        poll(lambda: a.metric("packrat_queue_rows", model="held") == 0, what="the queue to empty")
        # The client's gRPC deadline travels to the batcher: the row leaves the queue with it.
        code, _ = code_of(lambda: self.stub.ModelInfer(infer_request("held", one), timeout=0.5))
        self.assertEqual(code, grpc.StatusCode.DEADLINE_EXCEEDED)
        poll(lambda: a.metric("packrat_queue_rows", model="held") == 0,
             what="the expired request to leave the queue")
        self.assertEqual(a.metric("packrat_requests_total", code="429", model="held"), before_429 + 1)
        poll(lambda: a.metric("packrat_requests_total", code="504", model="held") == before_504 + 2,
             what="two 504s counted")

    def test_grpc_and_rest_requests_share_a_batch(self):
        """`pair` runs batches of exactly 2 rows: one row from REST and one from gRPC make one."""
        a = self.agent
        count = a.metric("packrat_batch_size_rows_count", model="pair")
        rows = a.metric("packrat_batch_size_rows_sum", model="pair")
        x_rest, x_grpc = floats(16, self.rng), floats(16, self.rng)
        result = {}
        rest = threading.Thread(target=lambda: result.update(rest=a.rest(
            "POST", "/v2/models/pair/infer", rest_json([("x", "FP32", [1, 16], x_rest)]))))
        rest.start()
        poll(lambda: a.metric("packrat_queue_rows", model="pair") == 1, what="the REST row queued")
        r = self.stub.ModelInfer(infer_request("pair", [("x", "FP32", [1, 16], x_grpc)]),
                                 timeout=CALL_TIMEOUT_S)
        rest.join(CALL_TIMEOUT_S)
        status, _, body = result["rest"]
        self.assertEqual(status, 200, body)
        self.assertEqual(a.metric("packrat_batch_size_rows_count", model="pair"), count + 1)
        self.assertEqual(a.metric("packrat_batch_size_rows_sum", model="pair"), rows + 2)
        # Each got its own row's answer: as `tiny` (the same weights) computes it alone.
        for x, got in ((x_grpc, struct.unpack("<8f", r.raw_output_contents[0])),
                       (x_rest, json.loads(body)["outputs"][0]["data"])):
            alone = self.stub.ModelInfer(infer_request("tiny", [("x", "FP32", [1, 16], x)]))
            for u, v in zip(got, struct.unpack("<8f", alone.raw_output_contents[0])):
                self.assertAlmostEqual(u, v, places=5)

    def test_grpc_requests_are_counted_like_rest_ones(self):
        a = self.agent
        ok = a.metric("packrat_requests_total", code="200", model="tiny")
        bad = a.metric("packrat_requests_total", code="400", model="tiny")
        for _ in range(3):
            self.stub.ModelInfer(infer_request("tiny", [("x", "FP32", [1, 16], floats(16, self.rng))]))
        code_of(lambda: self.stub.ModelInfer(infer_request("tiny", [("x", "FP32", [1, 8], [0.0] * 8)])))
        self.assertEqual(a.metric("packrat_requests_total", code="200", model="tiny"), ok + 3)
        self.assertEqual(a.metric("packrat_requests_total", code="400", model="tiny"), bad + 1)
        self.assertEqual(a.metric("packrat_inflight_requests", model="tiny"), 0)

    def test_statistics_and_log_settings_match_rest(self):
        """Triton's statistics and logging extensions over gRPC: what REST says, in Triton's
        messages."""
        s = self.stub
        meta = s.ServerMetadata(pb.ServerMetadataRequest())
        self.assertIn("statistics", meta.extensions)
        self.assertIn("logging", meta.extensions)
        before = s.ModelStatistics(pb.ModelStatisticsRequest(name="tiny")).model_stats[0]
        for _ in range(3):
            s.ModelInfer(infer_request("tiny", [("x", "FP32", [2, 16], floats(32, self.rng))]))
        code_of(lambda: s.ModelInfer(infer_request("tiny", [("x", "FP32", [1, 8], [0.0] * 8)])))
        after = s.ModelStatistics(pb.ModelStatisticsRequest(name="tiny", version="1")).model_stats[0]
        self.assertEqual((after.name, after.version), ("tiny", "1"))
        got = after.inference_stats
        was = before.inference_stats
        self.assertEqual(got.success.count - was.success.count, 3)
        self.assertEqual(got.fail.count - was.fail.count, 1)
        self.assertEqual(got.queue.count - was.queue.count, 3)
        self.assertEqual(after.inference_count - before.inference_count, 6)
        self.assertGreaterEqual(got.compute_infer.count - was.compute_infer.count, 3)
        self.assertGreater(got.compute_infer.ns, was.compute_infer.ns)
        self.assertGreater(after.last_inference, 0)
        self.assertEqual(sum(b.compute_infer.count for b in after.batch_stats),
                         after.execution_count)
        rest = json.loads(self.agent.rest("GET", "/v2/models/tiny/stats")[2])["model_stats"][0]
        self.assertEqual(rest["inference_count"], after.inference_count)
        self.assertEqual(rest["inference_stats"]["success"]["count"], got.success.count)
        self.assertEqual(rest["inference_stats"]["compute_infer"]["ns"], got.compute_infer.ns)
        every = s.ModelStatistics(pb.ModelStatisticsRequest())
        rest_every = json.loads(self.agent.rest("GET", "/v2/models/stats")[2])["model_stats"]
        self.assertEqual(sorted(m.name for m in every.model_stats),
                         sorted(m["name"] for m in rest_every))
        self.assertIn("tiny", [m.name for m in every.model_stats])
        self.assertEqual(code_of(lambda: s.ModelStatistics(pb.ModelStatisticsRequest(name="nope")))[0],
                         grpc.StatusCode.NOT_FOUND)
        self.assertEqual(code_of(lambda: s.ModelStatistics(
            pb.ModelStatisticsRequest(name="tiny", version="9")))[0], grpc.StatusCode.NOT_FOUND)

        def settings(response):
            return {k: getattr(v, v.WhichOneof("parameter_choice"))
                    for k, v in response.settings.items()}
        current = settings(s.LogSettings(pb.LogSettingsRequest()))
        self.assertEqual(current, json.loads(self.agent.rest("GET", "/v2/logging")[2]))
        self.assertEqual(current["log_verbose_level"], 0)
        change = pb.LogSettingsRequest()
        change.settings["log_verbose_level"].uint32_param = 1
        self.assertEqual(settings(s.LogSettings(change))["log_verbose_level"], 1)
        self.assertEqual(json.loads(self.agent.rest("GET", "/v2/logging")[2])["log_verbose_level"], 1)
        bad = pb.LogSettingsRequest()
        bad.settings["log_verbose_level"].uint32_param = 0
        bad.settings["log_file"].string_param = "/tmp/agent.log"
        self.assertEqual(code_of(lambda: s.LogSettings(bad))[0], grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(settings(s.LogSettings(pb.LogSettingsRequest()))["log_verbose_level"], 1)
        change.settings["log_verbose_level"].uint32_param = 0
        self.assertEqual(settings(s.LogSettings(change))["log_verbose_level"], 0)

    def test_model_config_is_triton_shaped_over_grpc_and_rest(self):
        """Triton's ModelConfig over gRPC and GET /v2/models/{m}/config on the inference address:
        the same fields, with Triton's names, enums and batch-dim convention."""
        c = self.stub.ModelConfig(pb.ModelConfigRequest(name="two_head")).config
        self.assertEqual((c.name, c.backend, c.max_batch_size), ("two_head", "pytorch", 8))
        self.assertEqual([(t.name, pb.DataType.Name(t.data_type), list(t.dims)) for t in c.input],
                         [("x", "TYPE_FP32", [8]), ("ids", "TYPE_INT64", [4])])
        self.assertEqual([(t.name, pb.DataType.Name(t.data_type), list(t.dims)) for t in c.output],
                         [("scores", "TYPE_FP32", [5]), ("best", "TYPE_INT64", [])])
        self.assertEqual([(g.name, g.count, pb.ModelInstanceGroup.Kind.Name(g.kind))
                          for g in c.instance_group], [("two_head_t1_b4", 1, "KIND_CPU")])
        self.assertEqual(c.WhichOneof("scheduling_choice"), "dynamic_batching")
        self.assertEqual(list(c.dynamic_batching.preferred_batch_size), [4])
        self.assertEqual(c.dynamic_batching.max_queue_delay_microseconds, 500)
        self.assertEqual(c.default_model_filename, "two_head.pt")
        self.assertEqual(c.parameters["packrat.instances"].string_value, "static")
        status, _, body = self.agent.rest("GET", "/v2/models/two_head/versions/1/config")
        self.assertEqual(status, 200)
        rest = json.loads(body)
        self.assertEqual(rest["name"], c.name)
        self.assertEqual(rest["platform"], c.platform)
        self.assertEqual(rest["max_batch_size"], c.max_batch_size)
        self.assertEqual(rest["input"][1], {"name": "ids", "data_type": "TYPE_INT64", "dims": [4]})
        self.assertEqual(rest["instance_group"],
                         [{"name": "two_head_t1_b4", "kind": "KIND_CPU", "count": 1}])
        self.assertEqual(rest["dynamic_batching"],
                         {"preferred_batch_size": [4], "max_queue_delay_microseconds": 500})
        self.assertEqual(code_of(lambda: self.stub.ModelConfig(pb.ModelConfigRequest(name="nope")))[0],
                         grpc.StatusCode.NOT_FOUND)
        self.assertEqual(self.agent.rest("GET", "/v2/models/nope/config")[0], 404)
        self.assertEqual(self.agent.rest("POST", "/v2/models/two_head/config", "{}")[0], 405)

    def test_system_shared_memory(self):
        """Tensors in a client's POSIX shared memory, referenced over REST and gRPC (Triton's
        system shared-memory extension): the answers match those of tensors sent inline."""
        x = floats(3 * 16, self.rng)
        inputs = [("x", "FP32", [3, 16], x)]
        status, _, body = self.agent.rest("POST", "/v2/models/tiny/infer", rest_json(inputs))
        self.assertEqual(status, 200, body)
        expected = raw_of_json_output(json.loads(body)["outputs"][0])

        memory = shared_memory.SharedMemory(create=True, size=4096)
        key = "/" + memory.name
        try:
            memory.buf[16:16 + 192] = struct.pack("<48f", *x)
            self.assertIn("system_shared_memory", json.loads(self.agent.rest("GET", "/v2")[2])
                          ["extensions"])
            self.assertIn("system_shared_memory",
                          self.stub.ServerMetadata(pb.ServerMetadataRequest()).extensions)
            # Register one region over REST, one over gRPC; both report both.
            status, _, body = self.agent.rest(
                "POST", "/v2/systemsharedmemory/region/in/register",
                json.dumps({"key": key, "offset": 0, "byte_size": 1024}))
            self.assertEqual(status, 200, body)
            self.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
                name="out", key=key, offset=2048, byte_size=1024), timeout=CALL_TIMEOUT_S)
            status, _, body = self.agent.rest("GET", "/v2/systemsharedmemory/status")
            self.assertEqual(status, 200, body)
            self.assertEqual(sorted((r["name"], r["key"], r["offset"], r["byte_size"])
                                    for r in json.loads(body)),
                             [("in", key, 0, 1024), ("out", key, 2048, 1024)])
            regions = self.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest())
            self.assertEqual(sorted(regions.regions), ["in", "out"])
            self.assertEqual(regions.regions["out"].offset, 2048)

            # REST: only references on the wire; the output lands in the region.
            request = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [3, 16],
                                   "parameters": {"shared_memory_region": "in",
                                                  "shared_memory_byte_size": 192,
                                                  "shared_memory_offset": 16}}],
                       "outputs": [{"name": "y", "parameters": {
                           "shared_memory_region": "out", "shared_memory_byte_size": 96}}]}
            status, _, body = self.agent.rest("POST", "/v2/models/tiny/infer",
                                              json.dumps(request))
            self.assertEqual(status, 200, body)
            output = json.loads(body)["outputs"][0]
            self.assertNotIn("data", output)
            self.assertEqual(output["shape"], [3, 8])
            self.assertEqual(output["parameters"]["shared_memory_byte_size"], 96)
            self.assertEqual(bytes(memory.buf[2048:2048 + 96]), expected)

            # gRPC: the same, at an offset; the output's raw entry stays, empty.
            memory.buf[2048:2048 + 96] = bytes(96)
            req = pb.ModelInferRequest(model_name="tiny")
            t = req.inputs.add(name="x", datatype="FP32", shape=[3, 16])
            t.parameters["shared_memory_region"].string_param = "in"
            t.parameters["shared_memory_byte_size"].int64_param = 192
            t.parameters["shared_memory_offset"].int64_param = 16
            o = req.outputs.add(name="y")
            o.parameters["shared_memory_region"].string_param = "out"
            o.parameters["shared_memory_byte_size"].int64_param = 96
            o.parameters["shared_memory_offset"].int64_param = 100
            r = self.stub.ModelInfer(req, timeout=CALL_TIMEOUT_S)
            self.assertEqual(list(r.raw_output_contents), [b""])
            self.assertEqual(r.outputs[0].parameters["shared_memory_region"].string_param, "out")
            self.assertEqual(bytes(memory.buf[2148:2148 + 96]), expected)

            # Mistakes: each a 4xx with a JSON error, or the gRPC code of the same Status.
            for name, body, code in (
                    ("in", {"key": key, "byte_size": 16}, 409),       # taken
                    ("z", {"key": "/no-such-object-here", "byte_size": 16}, 404),
                    ("z", {"key": "/packrat.1.x.ring", "byte_size": 16}, 400),  # the agent's own
                    ("z", {"key": key, "offset": 4000, "byte_size": 200}, 400),  # beyond it
                    ("z", {"byte_size": 16}, 400)):
                status, _, answer = self.agent.rest(
                    "POST", "/v2/systemsharedmemory/region/%s/register" % name, json.dumps(body))
                self.assertEqual(status, code, answer)
                self.assertIn("error", json.loads(answer))
            request["inputs"][0]["parameters"]["shared_memory_offset"] = 1000
            status, _, answer = self.agent.rest("POST", "/v2/models/tiny/infer",
                                                json.dumps(request))
            self.assertEqual(status, 400, answer)
            self.assertIn("beyond region 'in'", json.loads(answer)["error"])
            self.assertEqual(code_of(lambda: self.stub.SystemSharedMemoryRegister(
                pb.SystemSharedMemoryRegisterRequest(name="out", key=key, byte_size=8)))[0],
                grpc.StatusCode.ALREADY_EXISTS)
            self.assertEqual(self.agent.rest(
                "GET", "/v2/systemsharedmemory/region/nope/status")[0], 404)

            # Unregister one over gRPC, the rest over REST.
            self.stub.SystemSharedMemoryUnregister(
                pb.SystemSharedMemoryUnregisterRequest(name="out"), timeout=CALL_TIMEOUT_S)
            status, _, body = self.agent.rest("POST", "/v2/systemsharedmemory/unregister")
            self.assertEqual(status, 200, body)
            self.assertEqual(json.loads(self.agent.rest(
                "GET", "/v2/systemsharedmemory/status")[2]), [])
        finally:
            memory.close()
            memory.unlink()

    def test_repository_index(self):
        index = self.stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=CALL_TIMEOUT_S)
        states = {m.name: m.state for m in index.models}
        self.assertEqual(states.get("tiny"), "READY")
        self.assertIn("broken", states)
        self.assertNotEqual(states["broken"], "READY")
        ready = self.stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True))
        self.assertNotIn("broken", {m.name for m in ready.models})
        self.assertEqual(code_of(lambda: self.stub.RepositoryIndex(
            pb.RepositoryIndexRequest(repository_name="elsewhere")))[0],
            grpc.StatusCode.UNIMPLEMENTED)


class RepositoryAndShutdownTest(unittest.TestCase):
    """An agent with a model repository (explicit control) and a 3 s drain delay: load, infer,
    unload over gRPC; then SIGTERM: readiness false at once, a queued request answered."""

    def test_load_infer_unload_then_graceful_shutdown(self):
        repo = tempfile.mkdtemp(prefix="packrat-grpc-repo")
        try:
            for name, batching in (("r", "{max_batch: 4, max_delay_us: 500}"),
                                   ("slow", "{max_batch: 4, max_delay_us: 60000000}")):
                os.makedirs(os.path.join(repo, name))
                with open(os.path.join(repo, name, "model.yaml"), "w") as f:
                    f.write(tiny_model(name, batching).split("\n", 1)[1]
                            .replace("\n    ", "\n").lstrip())
            agent = Agent("server: {http: 127.0.0.1:0, management: 127.0.0.1:0, "
                          "metrics: 127.0.0.1:0, grpc: 127.0.0.1:0, drain_delay_s: 3, "
                          "model_repository: %s, model_control: explicit}\n" % repo)
            try:
                agent.wait_serving()
                self._repository(agent)
                self._shutdown(agent)
            finally:
                agent.stop(signal.SIGKILL)
        finally:
            shutil.rmtree(repo, ignore_errors=True)

    def _repository(self, agent):
        s = agent.stub()
        x = floats(16, random.Random(3))
        one = [("x", "FP32", [1, 16], x)]
        index = {m.name: m for m in s.RepositoryIndex(pb.RepositoryIndexRequest()).models}
        self.assertNotEqual(index["r"].state, "READY")
        self.assertEqual(code_of(lambda: s.ModelInfer(infer_request("r", one)))[0],
                         grpc.StatusCode.NOT_FOUND)
        s.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="r"),
                              timeout=START_TIMEOUT_S)
        self.assertTrue(s.ModelReady(pb.ModelReadyRequest(name="r")).ready)
        r = s.ModelInfer(infer_request("r", one), timeout=CALL_TIMEOUT_S)
        self.assertEqual(list(r.outputs[0].shape), [1, 8])
        index = {m.name: m for m in s.RepositoryIndex(pb.RepositoryIndexRequest(ready=True)).models}
        self.assertEqual(index["r"].state, "READY")
        # tritonclient's unload_model always sends unload_dependents.
        unload = pb.RepositoryModelUnloadRequest(model_name="r")
        unload.parameters["unload_dependents"].bool_param = False
        s.RepositoryModelUnload(unload, timeout=START_TIMEOUT_S)
        self.assertEqual(code_of(lambda: s.ModelInfer(infer_request("r", one)))[0],
                         grpc.StatusCode.NOT_FOUND)
        self.assertEqual(code_of(lambda: s.RepositoryModelLoad(
            pb.RepositoryModelLoadRequest(model_name="nowhere"), timeout=START_TIMEOUT_S))[0],
            grpc.StatusCode.NOT_FOUND)

    def _shutdown(self, agent):
        s = agent.stub()
        s.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="slow"),
                              timeout=START_TIMEOUT_S)
        self.assertTrue(s.ServerReady(pb.ServerReadyRequest()).ready)
        # A row that waits for a batch of 4: the shutdown must run and answer it.
        queued = s.ModelInfer.future(infer_request("slow", [("x", "FP32", [1, 16], [0.5] * 16)]),
                                     timeout=START_TIMEOUT_S)
        poll(lambda: agent.metric("packrat_queue_rows", model="slow") == 1, what="the queued row")
        agent.proc.send_signal(signal.SIGTERM)
        # Readiness goes false at once; the server keeps answering through the drain delay.
        poll(lambda: not s.ServerReady(pb.ServerReadyRequest(), timeout=CALL_TIMEOUT_S).ready,
             timeout_s=10, what="ServerReady false")
        # Through the drain delay health checks answer; other calls may already be refused
        # (UNAVAILABLE) once it is over and the listeners stop accepting.
        self.assertTrue(s.ServerLive(pb.ServerLiveRequest()).live)
        try:
            self.assertFalse(s.ModelReady(pb.ModelReadyRequest(name="slow")).ready)
        except grpc.RpcError as e:
            self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE)
        r = queued.result()
        self.assertEqual(list(r.outputs[0].shape), [1, 8])
        self.assertEqual(agent.proc.wait(60), 0, agent.log())
        self.assertTrue(agent.wait_log("gRPC server stopped", 5))


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agent", required=True, help="the packrat-agent executable")
    parser.add_argument("--models", required=True, help="the generated models folder")
    parser.add_argument("--proto", required=True, help="agent/grpc/grpc_service.proto")
    ARGS, rest = parser.parse_known_args()
    ARGS.models = os.path.abspath(ARGS.models)
    stubs = tempfile.mkdtemp(prefix="packrat-grpc-stubs")
    try:
        generate_stubs(ARGS.proto, stubs)
        unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
    finally:
        shutil.rmtree(stubs, ignore_errors=True)


if __name__ == "__main__":
    main()
