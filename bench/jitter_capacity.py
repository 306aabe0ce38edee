#!/usr/bin/python3
"""What service-time jitter costs a wide plan's capacity (issue 53): a static plan of many
instances on a virtual node, saturated by an open-loop load, with the emulated runtimes'
jitter CV 0 and then CV (default 0.3). Where the dispatcher waits for a batch's slowest slice
before it admits more rows, an instance that has finished its slice idles meanwhile, a loss
the slowdown tracker (each slice on its own) does not see; where each instance takes rows as
it frees up (agent/batching/dispatcher.h, Room), none is lost.

  bench/jitter_capacity.py PROFILE.csv [--threads 32] [--plans 32x1x2,32x1x4] [--cv 0.3]
                           [--rate 600] [--seconds 20] [--bins DIR[,DIR...]]

Prints, per plan, CV and build (--bins: directories holding packrat-agent and the runtimes,
run alternately; default build/bin), the completions per second between 5 s and the end of
the schedule (the load exceeds the plan: that is what it serves), against the profile's
B / L[t,b].
"""
import argparse
import csv
import importlib.machinery
import json
import os
import tempfile
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _module(name, path):
    loader = importlib.machinery.SourceFileLoader(name, path)
    module = types.ModuleType(loader.name)
    module.__file__ = loader.path
    loader.exec_module(module)
    return module


virtual = _module("bench_virtual", os.path.join(ROOT, "bench", "virtual"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--threads", type=int, default=32)
    ap.add_argument("--plans", default="32x1x2,32x1x4", help="COUNTxTHREADSxBATCH, comma-separated")
    ap.add_argument("--cv", type=float, default=0.3)
    ap.add_argument("--rate", type=float, default=600)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--bins", default=virtual.BIN, help="build directories, comma-separated")
    args = ap.parse_args()
    latency = {}
    with open(args.profile) as f:
        for row in csv.DictReader(f):
            latency[int(row["threads"]), int(row["batch"])] = float(row["latency_ms"])
    work = tempfile.mkdtemp(prefix="packrat-jitter-")
    body = os.path.join(work, "body.json")
    with open(body, "w") as f:
        json.dump({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4],
                               "data": [0] * 4}]}, f)
    virtual.raise_file_limit()
    bins = args.bins.split(",")
    print("| plan | profile rows/s | jitter CV | build | served rows/s | over the profile |")
    print("|---|---:|---:|---|---:|---:|")
    for spec in args.plans.split(","):
        count, threads, batch = (int(x) for x in spec.split("x"))
        rows = count * batch
        capacity = rows * 1e3 / latency[threads, batch]
        for cv, (k, bin_dir) in ((cv, b) for cv in (0.0, args.cv) for b in enumerate(bins)):
            agent = virtual.VirtualAgent(
                "m", os.path.abspath(args.profile), args.threads,
                f"[{{count: {count}, threads: {threads}, batch: {batch}}}]",
                f"{{max_batch: {rows}, max_delay_us: 2000, max_queue_rows: 1000000}}",
                os.path.join(work, f"agent-{spec}-{cv}-{k}.log"),
                emulate={"jitter_cv": cv, "seed": 5}, bin_dir=bin_dir)
            out = os.path.join(work, f"run-{spec}-{cv}-{k}.csv")
            try:
                virtual.loadgen(agent.port, f"{args.rate:g}:{args.seconds:g}", out, body, None, 1,
                                connections=512, failed_ok=True, timeout=args.seconds * 10)
            finally:
                agent.stop()
            with open(out) as f:
                done = [float(r["start_s"]) + float(r["latency_ms"]) / 1e3
                        for r in csv.DictReader(f) if r["status"] == "200"]
            served = sum(1 for t in done if 5 <= t <= args.seconds) / (args.seconds - 5)
            print(f"| <{count},{threads},{batch}> | {capacity:.1f} | {cv:g} | {bin_dir} | "
                  f"{served:.1f} | {served / capacity:.2f} |", flush=True)


if __name__ == "__main__":
    main()
