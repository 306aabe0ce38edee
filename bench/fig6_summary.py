"""Summarises bench/fig6.sh's per-request latencies around each reconfiguration.

usage: fig6_summary.py FIG6.csv STEP_SECONDS EVENTS
EVENTS: one line per reconfiguration, "decision serving drained" in seconds (same time base).
"""
import csv
import sys


def stats(rows, lo, hi):
    lat = sorted(float(r[1]) for r in rows if lo <= float(r[0]) < hi and r[2] == "200")
    if not lat:
        return None
    pick = lambda p: lat[min(len(lat) - 1, int(p * (len(lat) - 1) + 0.5))]
    return len(lat), sum(lat) / len(lat), pick(0.5), pick(0.99), lat[-1]


def line(name, s):
    if s is None:
        return f"| {name} | 0 | | | | |"
    n, mean, p50, p99, mx = s
    return f"| {name} | {n} | {mean:.1f} | {p50:.1f} | {p99:.1f} | {mx:.1f} |"


def main():
    rows = list(csv.reader(open(sys.argv[1])))
    step = float(sys.argv[2])
    events = [list(map(float, l.split())) for l in open(sys.argv[3]) if l.strip()]
    end = max(float(r[0]) for r in rows)
    print("| window (arrival time) | requests | mean ms | p50 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|---:|---:|")
    print(line(f"low rate, before the step (0–{step:.0f} s)", stats(rows, 0, step)))
    previous = step
    for k, (decision, serving, drained) in enumerate(events):
        nxt = events[k + 1][0] if k + 1 < len(events) else end
        print(line(f"#{k + 1}: 5 s before the decision ({decision - 5:.1f}–{decision:.1f} s)",
                   stats(rows, max(previous, decision - 5), decision)))
        print(line(f"#{k + 1}: shadow set starting ({decision:.1f}–{serving:.1f} s, "
                   f"{serving - decision:.2f} s)", stats(rows, decision, serving)))
        print(line(f"#{k + 1}: first 3 s on the new set", stats(rows, serving, serving + 3)))
        print(line(f"#{k + 1}: settled, new set ({serving + 5:.1f}–{nxt:.1f} s)",
                   stats(rows, serving + 5, nxt)))
        previous = serving
    print()
    print("errors:", sum(1 for r in rows if r[2] != "200"), "of", len(rows), "requests")


if __name__ == "__main__":
    main()
