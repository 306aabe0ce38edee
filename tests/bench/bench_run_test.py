#!/usr/bin/python3
"""Tests of bench/run's arithmetic and of the results page it writes.

bench/run measures for tens of minutes, so CI does not run it; what it computes from its
measurements (the rate search, the completion rate, the probes' lengths, the peers' plans, the
goal's figures) is tested here on made-up numbers, and the peers section of docs/benchmarks.md
is checked to be exactly what bench/run renders from the results kept in bench/data/peers/:
the page's numbers are the stored measurements', not edited by hand.

Run: /usr/bin/python3 tests/bench/bench_run_test.py (CTest: bench_run).
"""
import argparse
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import tempfile
import unittest
from unittest import mock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_bench_run():
    """bench/run as a module (it has no .py suffix, so the loader is named)."""
    path = os.path.join(ROOT, "bench", "run")
    loader = importlib.machinery.SourceFileLoader("bench_run", path)
    spec = importlib.util.spec_from_loader("bench_run", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


bench = load_bench_run()
bench.log = lambda *args: None  # its progress lines are not what is tested


def search(rates, refine, passes):
    """Drives a RateSearch with `passes(rate)` as the probe's verdict; the rates probed."""
    s = bench.RateSearch(rates, refine)
    probed = []
    while (rate := s.next_rate()) is not None:
        probed.append(rate)
        s.record(rate, passes(rate), {"rate": rate})
    return s, probed


class RateSearchTest(unittest.TestCase):
    def test_rises_until_a_rate_fails_then_bisects(self):
        s, probed = search([10, 20, 40, 80], 2, lambda r: r <= 33)
        self.assertEqual(probed, [10, 20, 40, 30, 35])
        self.assertEqual(s.best["rate"], 30)
        self.assertEqual(len(s.tried), 5)

    def test_a_server_failing_the_first_rate_is_searched_below_it(self):
        s, probed = search([10, 20], 2, lambda r: r <= 3)
        self.assertEqual(probed, [10, 5, 2.5])
        self.assertEqual(s.best["rate"], 2.5)

    def test_no_rate_passing_leaves_no_best(self):
        s, probed = search([10, 20], 3, lambda r: False)
        self.assertEqual(probed, [10, 5, 2.5, 1.25])
        self.assertIsNone(s.best)

    def test_every_rate_passing_ends_at_the_last(self):
        s, probed = search([10, 20, 40], 4, lambda r: True)
        self.assertEqual(probed, [10, 20, 40])
        self.assertEqual(s.best["rate"], 40)


class CompletionRateTest(unittest.TestCase):
    def test_counts_successful_answers_sent_within_the_window(self):
        rows = [
            ["1.0", "500", "200"],    # answered at 1.5 s: in the warm-up
            ["9.0", "1500", "200"],   # sent in the warm-up, answered at 10.5 s: counts
            ["12.0", "100", "200"],   # counts
            ["15.0", "100", "503"],   # an error: does not count
            ["25.0", "4000", "200"],  # sent in the window, answered at 29 s: counts
            ["28.0", "3000", "200"],  # answered at 31 s, after the load stopped
        ]
        self.assertAlmostEqual(bench.completion_rate(rows, 10, 30), 3 / 20)

    def test_an_empty_probe_completed_nothing(self):
        self.assertEqual(bench.completion_rate([], 10, 30), 0)


class ProbeSummaryTest(unittest.TestCase):
    def test_percentiles_of_the_successful_requests_sent_in_the_window(self):
        warmup = [[f"{i / 10:.1f}", "5000", "200"] for i in range(50)]  # before 10 s: cut
        window = [[f"{10 + i / 10:.1f}", str(i + 1), "200"] for i in range(100)]
        failed = [["20.0", "1", "503"], ["21.0", "1", "503"]]
        result = bench.probe_summary(warmup + window + failed, 12.5, 30, 10)
        # The nearest rank of 100 latencies 1..100 ms: q * 99 rounded, one-based.
        self.assertEqual((result["p50"], result["p90"], result["p99"]), (51, 90, 99))
        self.assertEqual(result["errors"], 2)
        self.assertEqual(result["rate"], 12.5)

    def test_a_probe_without_a_successful_request_has_no_result(self):
        self.assertIsNone(bench.probe_summary([["12.0", "1", "503"]], 1, 30, 10))


class ProbeTimingTest(unittest.TestCase):
    def args(self, seconds):
        return argparse.Namespace(probe_seconds=seconds)

    def test_a_probe_lasts_at_least_six_p99_targets(self):
        # The decoder's target is 10 s: a 30-s probe is stretched to 60 s, a third warm-up.
        self.assertEqual(bench.probe_timing("gpt2_like", self.args(30)), (60, 20, 140))

    def test_a_longer_probe_is_kept(self):
        self.assertEqual(bench.probe_timing("resnet50", self.args(30)), (30, 10, 80))
        self.assertEqual(bench.probe_timing("resnet50", self.args(5)), (6, 2, 32))


class PeerPlanTest(unittest.TestCase):
    def test_fat_is_one_instance_with_every_thread(self):
        self.assertEqual(bench.plan_body("fat", 8, 16),
                         {"instances": [{"count": 1, "threads": 16, "batch": 8}]})

    def test_per_core_splits_the_batch_over_one_thread_instances(self):
        self.assertEqual(bench.plan_body("per_core", 8, 2),
                         {"instances": [{"count": 2, "threads": 1, "batch": 4}]})
        # Fewer rows than cores: one instance a row, the other cores idle.
        self.assertEqual(bench.per_core_plan(4, 16), (1, 4))
        # Rows not divisible by the cores: ceil(rows / cores) each, as many as that needs.
        self.assertEqual(bench.per_core_plan(20, 16), (2, 10))

    def test_packrat_is_given_only_the_batch_size(self):
        self.assertEqual(bench.plan_body("packrat", 8, 16), {"batch": 8})


def results(fat, packrat, fat_rounds, packrat_rounds, plans=None):
    return {"latency": {"fat": fat, "packrat": packrat},
            "rounds": {"fat": fat_rounds, "packrat": packrat_rounds},
            "plans": plans or {}, "throughput": {}}


class SummaryTest(unittest.TestCase):
    def test_counts_the_batch_sizes_slower_than_fat_by_more_than_two_percent(self):
        res = results({1: 100, 2: 100, 4: 100}, {1: 90, 2: 101, 4: 110},
                      {b: [100, 100] for b in (1, 2, 4)},
                      {1: [90, 90], 2: [101, 101], 4: [100, 120]})
        lines = bench.summary_lines(res, [1, 2, 4])
        self.assertIn("best 0.90 (B = 1), worst 1.10 (B = 4); 1 of 3 batch sizes more than "
                      "2% slower than fat.", lines[0])
        # B = 4 was not slower in every round (100 against 100), so the rounds call it noise.
        self.assertEqual(lines[-1], "- Packrat slower than fat by more than 2% in every round: "
                         "at no B.")

    def test_names_the_batch_sizes_slower_in_every_round(self):
        res = results({1: 100, 2: 100}, {1: 110, 2: 100},
                      {1: [100, 102], 2: [100, 100]}, {1: [105, 108], 2: [99, 101]},
                      plans={"fat": {1: "<1,2,1>", 2: "<1,2,2>"},
                             "packrat": {1: "<2,1,1>", 2: "<1,2,2>"}})
        lines = bench.noise_lines(res, [1, 2])
        self.assertIn("Where Packrat's plan is the fat instance itself (B = 2: one "
                      "configuration measured twice), Packrat / fat is 1.00–1.00.", lines[1])
        self.assertEqual(lines[-1], "- Packrat slower than fat by more than 2% in every round: "
                         "B = 1.")

    def test_reports_the_python_factor_at_the_p99_target(self):
        res = results({1: 100}, {1: 100}, {}, {})
        res["latency"]["python"] = {1: 250}
        res["throughput"] = {"packrat": {"best": {"rate": 30}},
                             "python": {"best": {"rate": 12}}}
        lines = bench.summary_lines(res, [1])
        self.assertIn("- The Python server's latency is 2.50–2.50× the fat baseline's.", lines)
        self.assertIn("- At the p99 target Packrat sustains 2.50× the Python server's request "
                      "rate.", lines)


class ResultsPageTest(unittest.TestCase):
    """bench/run --render-only from bench/data/peers/, in a scratch root, against the page."""

    def setUp(self):
        self.scratch = tempfile.mkdtemp(prefix="bench-run-test-")
        shutil.copytree(os.path.join(ROOT, "bench", "data", "peers"),
                        os.path.join(self.scratch, "bench", "data", "peers"))
        self.addCleanup(shutil.rmtree, self.scratch)
        patcher = mock.patch.object(bench, "ROOT", self.scratch)
        patcher.start()
        self.addCleanup(patcher.stop)
        self.addCleanup(bench.use_tag, "")
        bench.use_tag("", docs=False)

    def test_the_docs_section_is_rendered_from_the_kept_results(self):
        bench.restore_data()
        stored = bench.load_results(os.path.join(bench.WORK, "results.json"))
        args = argparse.Namespace(tokens=32,
                                  probe_discard=stored.get("probe_discard", 10))
        # Plot scripts are written but gnuplot is not run: the page is what is compared.
        with mock.patch.object(bench, "gnuplot", return_value=True):
            section = bench.render(stored["results"], stored["machine"], args,
                                   stored["command"])
        with open(os.path.join(ROOT, "docs", "benchmarks.md")) as f:
            page = f.read()
        self.assertIn(bench.BEGIN, page)
        begin = page.index(bench.BEGIN)
        end = page.index(bench.END) + len(bench.END) + 1
        self.assertEqual(section, page[begin:end],
                         "docs/benchmarks.md's peers section differs from what bench/run "
                         "renders from bench/data/peers/: edit the data, not the page "
                         "(bench/run --render-only)")

    def test_each_peers_rate_is_its_kept_probe_and_the_highest_that_passed(self):
        bench.restore_data()
        stored = bench.load_results(os.path.join(bench.WORK, "results.json"))
        for model, res in stored["results"].items():
            target = bench.MODELS[model]["target_ms"]
            for peer, entry in res["throughput"].items():
                with self.subTest(model=model, peer=peer):
                    best = entry["best"]
                    discard = entry["probe_discard"]
                    # Runs before probe_timing() recorded no length: theirs was 3 x the cut.
                    seconds = entry.get("probe_seconds", 3 * discard)
                    rows = bench.probe_rows(os.path.join(bench.WORK, best["csv"]))
                    again = bench.probe_summary(rows, best["rate"], seconds, discard)
                    for key in ("p50", "p90", "p99", "achieved", "errors"):
                        self.assertAlmostEqual(again[key], best[key], delta=0.006, msg=key)
                    self.assertEqual(again["errors"], 0)
                    self.assertLessEqual(again["p99"], target)
                    passed = [t["rate"] for t in entry["tried"]
                              if t and not t.get("timeout") and t["errors"] == 0
                              and t["p99"] <= target]
                    self.assertEqual(best["rate"], max(passed))

    def test_splice_replaces_only_the_marked_section(self):
        doc = os.path.join(self.scratch, "benchmarks.md")
        with open(doc, "w") as f:
            f.write(f"# page\n\nbefore\n\n{bench.BEGIN}\nold\n{bench.END}\n\nafter\n")
        no_projection = subprocess.CompletedProcess([], 1, stdout="", stderr="")
        with mock.patch.object(bench, "DOC", doc), \
                mock.patch.object(bench.subprocess, "run", return_value=no_projection):
            bench.splice(f"{bench.BEGIN}\nnew\n{bench.END}\n")
            with open(doc) as f:
                self.assertEqual(f.read(), f"# page\n\nbefore\n\n{bench.BEGIN}\nnew\n"
                                 f"{bench.END}\n\nafter\n")

    def test_splice_appends_a_section_the_page_lacks(self):
        doc = os.path.join(self.scratch, "benchmarks.md")
        with open(doc, "w") as f:
            f.write("# page\n")
        no_projection = subprocess.CompletedProcess([], 1, stdout="", stderr="")
        with mock.patch.object(bench, "DOC", doc), \
                mock.patch.object(bench.subprocess, "run", return_value=no_projection):
            bench.splice(f"{bench.BEGIN}\nnew\n{bench.END}\n")
            with open(doc) as f:
                self.assertEqual(f.read(), f"# page\n\n{bench.BEGIN}\nnew\n{bench.END}\n")


if __name__ == "__main__":
    unittest.main()
