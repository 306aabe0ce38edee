#!/usr/bin/python3
"""A synthetic T-core latency profile from a measured one with fewer cores (issue "virtual
many-core node": the T = 64 rows of bench/virtual).

  bench/extrapolate_profile.py IN.csv OUT.csv THREADS

For every batch size b the measured latencies L[t, b] at t = 4 … t_max (16 for the published
profiles) are fitted by Amdahl's law, L(t) = s + p / t, least squares in 1/t. The rows up to
t_max are copied unchanged; each new row t_max < t ≤ THREADS is

    L[t, b] = L[t_max, b] + max(0, p) * (1/t - 1/t_max)

i.e. the fit's parallel part keeps shrinking from the last measured point and the serial part
stays. This is optimistic for wide instances (no socket boundary, no memory-bandwidth limit,
no OpenMP barrier growing with t), so it flatters the fat ⟨1,T,B⟩ peer, not Packrat's thin
instances, whose thread counts the measured rows mostly cover. min/max scale with the mean.
"""
import csv
import sys


def fit(points):
    """(s, p) of L = s + p / t through [(t, L)], least squares in x = 1/t."""
    xs = [1.0 / t for t, _ in points]
    ys = [l for _, l in points]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    p = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else 0.0
    return my - p * mx, p


def main(src, dst, threads):
    with open(src) as f:
        rows = [r for r in csv.DictReader(f)]
    by_batch = {}
    for r in rows:
        by_batch.setdefault(int(r["batch"]), {})[int(r["threads"])] = r
    t_max = max(int(r["threads"]) for r in rows)
    out = []
    for b in sorted(by_batch):
        measured = by_batch[b]
        for t in sorted(measured):
            r = measured[t]
            out.append((t, b, float(r["latency_ms"]), float(r["latency_min_ms"]),
                        float(r["latency_max_ms"])))
        _, p = fit([(t, float(r["latency_ms"])) for t, r in measured.items() if t >= 4])
        last = measured[t_max]
        base = float(last["latency_ms"])
        lo, hi = float(last["latency_min_ms"]) / base, float(last["latency_max_ms"]) / base
        for t in range(t_max + 1, threads + 1):
            l = base + max(0.0, p) * (1.0 / t - 1.0 / t_max)
            out.append((t, b, l, l * lo, l * hi))
    out.sort()
    with open(dst, "w") as f:
        f.write("threads,batch,latency_ms,latency_min_ms,latency_max_ms\n")
        for t, b, l, lo, hi in out:
            f.write(f"{t},{b},{l:.3f},{lo:.3f},{hi:.3f}\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
