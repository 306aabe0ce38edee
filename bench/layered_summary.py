"""Summarises bench/layered.sh: one Markdown table per rate, the comparison at each rate, and
docs/layered-MODEL.png (mean and p99 latency per mode over the arrival rate).

usage: layered_summary.py WORKDIR RATES BUDGET_MS N_OPT THREADS WINDOW_MS MODEL
"""
import csv
import os
import re
import subprocess
import sys

MODES = [("layered", "layered (lbci)"), ("serial", "serial"),
         ("fixed", "Batchsize(10), window"), ("packrat", "Packrat batching")]


def load(path):
    rows = list(csv.DictReader(open(path)))
    ok = [r for r in rows if r["status"] == "200"]
    lat = sorted(float(r["latency_ms"]) for r in ok)
    if not lat:
        return None
    first = min(float(r["start_s"]) for r in rows)
    last = max(float(r["start_s"]) + float(r["latency_ms"]) / 1e3 for r in ok)
    pick = lambda p: lat[min(len(lat) - 1, int(p * (len(lat) - 1) + 0.5))]
    return {"n": len(rows), "ok": len(ok), "mean": sum(lat) / len(lat), "p50": pick(0.5),
            "p99": pick(0.99), "throughput": len(ok) / (last - first), "lat": lat}


def metrics(path):
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path):
        m = re.match(r'(\w+)\{[^}]*?(?:outcome="(\w+)")?[^}]*\} ([0-9.e+-]+)', line)
        if m:
            key = m.group(1) + (":" + m.group(2) if m.group(2) else "")
            out[key] = float(m.group(3))
    return out


def main():
    work, rates, budget, n_opt, threads, window, model = sys.argv[1:8]
    title = {"resnet50": "ResNet-50", "alexnet": "AlexNet"}.get(model, model)
    rates = [int(r) for r in rates.split(",")]
    budget = float(budget)
    results = {}
    print(f"Staged {title}, one instance of {threads} threads, budget {budget:.0f} ms, "
          f"N_opt = {n_opt}, Batchsize(10) window {window} ms.\n")
    print("| rate (req/s) | mode | requests | mean ms | p50 ms | p99 ms | throughput (req/s) "
          "| over budget | mean batch rows | rows joined |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for rate in rates:
        for mode, label in MODES:
            r = load(f"{work}/{mode}-{rate}.csv")
            if r is None:
                continue
            m = metrics(f"{work}/{mode}-{rate}.metrics")
            batch = (m.get("packrat_batch_size_rows_sum", 0) /
                     max(1, m.get("packrat_batch_size_rows_count", 1)))
            joined = int(m.get("packrat_topup_rows_total", 0))
            over = sum(1 for v in r["lat"] if v > budget) / len(r["lat"])
            results[(rate, mode)] = r
            print(f"| {rate} | {label} | {r['n']} | {r['mean']:.1f} | {r['p50']:.1f} | "
                  f"{r['p99']:.1f} | {r['throughput']:.2f} | {100 * over:.1f}% | {batch:.2f} | "
                  f"{joined if mode == 'layered' else '–'} |")
    print()
    print("| rate (req/s) | best other mode (mean) | layered mean vs it | layered p99 vs its p99 |")
    print("|---:|---|---:|---:|")
    for rate in rates:
        if (rate, "layered") not in results:
            continue
        others = [(results[(rate, m)]["mean"], m) for m, _ in MODES[1:] if (rate, m) in results]
        if not others:
            continue
        best_mean, best = min(others)
        lay = results[(rate, "layered")]
        print(f"| {rate} | {dict(MODES)[best]} ({best_mean:.1f} ms) | "
              f"{100 * (lay['mean'] / best_mean - 1):+.1f}% | "
              f"{100 * (lay['p99'] / results[(rate, best)]['p99'] - 1):+.1f}% |")

    data = f"{work}/plot.dat"
    with open(data, "w") as f:
        for rate in rates:
            f.write(str(rate))
            for mode, _ in MODES:
                r = results.get((rate, mode))
                f.write(f" {r['mean']:.2f} {r['p99']:.2f}" if r else " NaN NaN")
            f.write("\n")
    plot = [
        "set terminal pngcairo size 1000,450 font ',10'",
        f"set output 'docs/layered-{model}.png'",
        f"set multiplot layout 1,2 title 'Staged {title}, single-image requests, Poisson "
        f"arrivals, T={threads}, budget {budget:.0f} ms'",
        "set xlabel 'arrival rate (req/s)'; set grid; set key top left; set logscale y",
        "set ylabel 'mean latency (ms)'",
        "plot " + ", ".join(f"'{data}' using 1:{2 + 2 * i} with linespoints title '{label}'"
                            for i, (_, label) in enumerate(MODES)),
        "set ylabel 'p99 latency (ms)'",
        "plot " + ", ".join(f"'{data}' using 1:{3 + 2 * i} with linespoints title '{label}'"
                            for i, (_, label) in enumerate(MODES)),
        "unset multiplot",
    ]
    subprocess.run(["gnuplot"], input="\n".join(plot), text=True, check=True)
    print(f"\nwrote docs/layered-{model}.png")


if __name__ == "__main__":
    main()
