#!/usr/bin/python3
"""A plain Python inference server, as a user would write one (the lbci-paper deploys AlexNet
this way): Flask and torch from Debian's packages, the TorchScript model loaded once, every
request run as it comes on one of Flask's threads with torch's intra-op threads, no batching
across requests. It speaks the subset of Packrat's REST API the benchmarks use:

  POST /v2/models/<m>/infer     KServe v2: JSON tensors or the binary tensor extension in,
                                JSON out (one input, one output)
  POST /v2/models/<m>/generate  a GptDecoder model (scripts/make_models.py): token ids in and
                                out, greedy, a key/value cache per request
  GET  /v2/health/ready

  /usr/bin/python3 bench/peers/python_server.py --model PATH --name m --port P [--threads T]
                                                [--generative] [--max-concurrent N]

By default every request's model call runs at once on its own Flask thread, each with T intra-op
threads: concurrency helps ResNet-50 on 2 cores (two calls at once end after 70 ms, one alone
after 55) and ruins the BERT-like encoder (from four threads at once a call takes 1.7 s, alone
0.05 s), whose many small operators each wait for all of the oversubscribed threads.
--max-concurrent N lets at most N model calls run at once (the rest wait), what a user does
after seeing that.
"""
import argparse
import contextlib
import json
import threading

import torch
from flask import Flask, Response, request

DTYPES = {"FP32": torch.float32, "INT64": torch.int64, "INT32": torch.int32,
          "FP64": torch.float64, "UINT8": torch.uint8}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--name", default="m")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--generative", action="store_true")
    parser.add_argument("--max-concurrent", type=int, default=0,
                        help="model calls run at once at most (0: no bound)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    # Held around every model call (a decoder's prefill and each step).
    calls = (threading.BoundedSemaphore(args.max_concurrent) if args.max_concurrent > 0
             else contextlib.nullcontext())
    model = torch.jit.load(args.model).eval()
    app = Flask(__name__)

    @app.get("/v2/health/ready")
    def ready():
        return ""

    @app.post(f"/v2/models/{args.name}/infer")
    def infer():
        body = request.get_data()
        header_length = request.headers.get("Inference-Header-Content-Length")
        if header_length is not None:
            header = json.loads(body[: int(header_length)])
            raw = body[int(header_length):]
        else:
            header, raw = json.loads(body), b""
        spec = header["inputs"][0]
        dtype = DTYPES[spec["datatype"]]
        if "data" in spec:
            x = torch.tensor(spec["data"], dtype=dtype).reshape(spec["shape"])
        else:
            x = torch.frombuffer(bytearray(raw), dtype=dtype).reshape(spec["shape"])
        with calls, torch.inference_mode():
            y = model(x)
        if isinstance(y, (tuple, list)):
            y = y[0]
        out = {"model_name": args.name, "outputs": [{
            "name": "y", "datatype": "FP32", "shape": list(y.shape),
            "data": y.float().flatten().tolist()}]}
        return Response(json.dumps(out), mimetype="application/json")

    @app.post(f"/v2/models/{args.name}/generate")
    def generate():
        call = json.loads(request.get_data())
        ids = torch.tensor(call["input_ids"], dtype=torch.int64)
        max_tokens = int(call.get("parameters", {}).get("max_tokens", 16))
        layers, heads, head_dim, max_len, _ = model.config()
        cache_k = torch.zeros(layers, 1, max_len, heads, head_dim)
        cache_v = torch.zeros_like(cache_k)
        out = []
        with torch.inference_mode():
            with calls:
                logits = model.prefill(ids, cache_k, cache_v, 0) + model.lm_bias
            token = int(logits.argmax())
            position = ids.numel()
            out.append(token)
            while len(out) < max_tokens and position < max_len:
                with calls:
                    logits = model.step(torch.tensor([token]), torch.tensor([position]),
                                        cache_k, cache_v)[0] + model.lm_bias
                token = int(logits.argmax())
                position += 1
                out.append(token)
        return Response(json.dumps({"model_name": args.name, "output_ids": out,
                                    "finish_reason": "length"}), mimetype="application/json")

    if args.generative:
        # Warm the graph executor up as the other servers do before they report ready.
        cache = torch.zeros(*([model.config()[0], 1] + model.config()[3:4] +
                              model.config()[1:3]))
        with torch.inference_mode():
            model.prefill(torch.tensor([1, 2, 3]), cache, cache.clone(), 0)
    app.run(host="127.0.0.1", port=args.port, threaded=True)


if __name__ == "__main__":
    main()
