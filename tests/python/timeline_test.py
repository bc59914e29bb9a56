"""The timeline plot: python/greyhound_tools/timeline.py and scripts/plot-timeline.

usage: /usr/bin/python3 timeline_test.py
Checks the throughput series, fault spans and markers taken from a small hand-made report
(timeline-report.json, with entries a reader must skip), that the CLI writes a PNG and an SVG, and that a
missing or malformed report ends it with exit status 2 and one line naming the file. Exits 77 (skipped)
where matplotlib is missing.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.join(HERE, "..", "..")
FIXTURE = os.path.join(HERE, "timeline-report.json")
SCRIPT = os.path.join(ROOT, "scripts", "plot-timeline")
sys.path.insert(0, os.path.join(ROOT, "python"))

from greyhound_tools import timeline  # noqa: E402
from greyhound_tools.timeline import FaultSpan, Marker  # noqa: E402


class PureTest(unittest.TestCase):
    def setUp(self):
        self.report = timeline.load_report(FIXTURE)

    def test_end_times_skip_entries_without_a_number(self):
        self.assertEqual(timeline.iteration_end_times(self.report), [0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 5.5, 8.0])
        odd = {"iterations": [{"t_s": 2}, {"t_s": 1.0}, {"t_s": "3"}, {"t_s": True}, {"t_s": float("nan")}, 4]}
        self.assertEqual(timeline.iteration_end_times(odd), [1.0, 2.0])

    def test_throughput_counts_iteration_ends_in_the_window(self):
        series = timeline.throughput_series(timeline.iteration_end_times(self.report), window_s=2.0)
        expected = [(1.0, 120.0), (1.5, 120.0), (2.0, 120.0), (3.0, 90.0), (4.0, 60.0), (5.0, 60.0), (5.5, 80.0),
                    (8.0, 24.0)]  # the last: one iteration of 2.5 s, longer than the window
        self.assertEqual(len(series), len(expected))
        for (t, rate), (t_want, rate_want) in zip(series, expected):
            self.assertEqual(t, t_want)
            self.assertAlmostEqual(rate, rate_want, places=9)
        # Default 5 s window at t = 8: four iterations since the end at 3.0.
        self.assertAlmostEqual(timeline.throughput_series(timeline.iteration_end_times(self.report))[-1][1], 48.0)
        self.assertEqual(timeline.throughput_series([]), [])
        self.assertEqual(timeline.throughput_series([1.0]), [])
        self.assertEqual(timeline.throughput_series([1.0, 1.0]), [])

    def test_fault_spans(self):
        self.assertEqual(timeline.fault_spans(self.report), [
            FaultSpan("gpu", 2.0, 4.0, "throttled GPU: rank 1"),
            FaultSpan("link", 6.0, 8.0, "congested link: nodes 0-1"),  # no label: the kind's name
            FaultSpan("thermal", 8.5, 9.5, "thermal"),  # an unknown kind; the cpu fault has no end
        ])

    def test_markers(self):
        self.assertEqual(timeline.markers(self.report), [
            Marker(2.5, timeline.DETECT, "#1 detected"),
            Marker(3.0, timeline.LOCALISE, "rank 1"),  # repeated at 3.6 (not marked), nothing found at 4.2
            Marker(3.4, timeline.REMEDY, "S2 [3,5]"),  # micro-batches from the plan of epoch 1
            Marker(4.6, timeline.REVERT, "revert [4,4]"),
            Marker(5.0, timeline.CLOSE, "#1 closed"),
            Marker(6.5, timeline.DETECT, "#2 detected"),
            Marker(7.0, timeline.LOCALISE, "link 0-1"),
            Marker(7.2, timeline.FAILED, "S3 rejected"),
            Marker(7.3, timeline.FAILED, "plan timed out"),  # its detail is no object
            Marker(7.8, timeline.CLOSE, "closed"),  # no incident id; the open without t_s is skipped
        ])

    def test_localisation_text(self):
        two = {"cause": "communication", "suspect_links": [{"nodes": [0, 1]}, {"nodes": [2, 3]}]}
        self.assertEqual(timeline._localisation_text(two), "link 0-1, link 2-3")
        three = {"suspect_links": [{"nodes": [0, 1]}, {"nodes": [1, 2]}, {"nodes": [2, 3]}]}
        self.assertEqual(timeline._localisation_text(three), "3 links")
        self.assertEqual(timeline._localisation_text({"cause": "communication", "culprit": 2}), "communication")
        self.assertIsNone(timeline._localisation_text({"cause": "unknown", "culprit": -1}))

    def test_defaults(self):
        self.assertEqual(timeline.default_label(self.report), "with greyhound")
        self.assertEqual(timeline.default_label({"config": {"greyhound": False}}), "without greyhound")
        self.assertEqual(timeline.default_title(self.report, FIXTURE), "TP2 x DP2 x PP1 on 2 nodes, 8 micro-batches")
        self.assertEqual(timeline.default_title({}, "/tmp/run.json"), "run.json")
        self.assertEqual(timeline.default_prefix("build/demo-report.json"), "build/demo-report-timeline")
        self.assertEqual(timeline.default_prefix("report"), "report-timeline")

    def test_load_report_errors(self):
        with tempfile.TemporaryDirectory() as tmp:
            cases = {"garbage": "not a greyhound report", "[]": "the top level is not an object",
                     "{\"events\": []}": "no \"iterations\" list",
                     "{\"iterations\": [], \"events\": {}}": "\"events\" is not a list"}
            for n, (text, why) in enumerate(cases.items()):
                path = os.path.join(tmp, f"r{n}.json")
                with open(path, "w") as f:
                    f.write(text)
                with self.assertRaises(timeline.ReportError) as e:
                    timeline.load_report(path)
                if text == "garbage":
                    self.assertEqual(str(e.exception), f"{path}: not valid JSON (line 1, column 1: Expecting value)")
                else:
                    self.assertEqual(str(e.exception), f"{path}: not a greyhound report ({why})")
            missing = os.path.join(tmp, "missing.json")
            with self.assertRaises(timeline.ReportError) as e:
                timeline.load_report(missing)
            self.assertEqual(str(e.exception), f"{missing}: cannot read (No such file or directory)")


class CliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.env = dict(os.environ, MPLCONFIGDIR=self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def run_cli(self, *args):
        return subprocess.run([SCRIPT, *args], capture_output=True, text=True, env=self.env, timeout=120)

    def test_writes_png_and_svg(self):
        prefix = os.path.join(self.tmp.name, "out", "fixture")
        os.mkdir(os.path.dirname(prefix))
        r = self.run_cli(FIXTURE, "--compare", "without greyhound=" + FIXTURE, "--out", prefix, "--title", "T")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, f"plot-timeline: wrote {prefix}.png and {prefix}.svg\n")
        with open(prefix + ".png", "rb") as f:
            png = f.read()
        self.assertTrue(png.startswith(b"\x89PNG\r\n\x1a\n"))
        self.assertGreater(len(png), 10000)
        with open(prefix + ".svg") as f:
            svg = f.read()
        self.assertIn("<svg", svg)
        for text in ("with greyhound", "without greyhound", "slow GPU", "congested link", "S2 [3,5]", "link 0-1"):
            self.assertIn(text, svg)  # matplotlib names each text in a comment

    def test_default_prefix_is_next_to_the_report(self):
        report = os.path.join(self.tmp.name, "run.json")
        with open(FIXTURE) as src, open(report, "w") as dst:
            dst.write(src.read())
        r = self.run_cli(report)
        self.assertEqual(r.returncode, 0, r.stderr)
        for ext in (".png", ".svg"):
            self.assertGreater(os.path.getsize(os.path.join(self.tmp.name, "run-timeline" + ext)), 0)

    def assert_fails(self, args, status, line):
        r = self.run_cli(*args)
        self.assertEqual(r.returncode, status, r.stderr)
        self.assertEqual(r.stderr, line + "\n")
        self.assertEqual(r.stdout, "")

    def test_bad_reports_exit_2_with_one_line(self):
        bad = os.path.join(self.tmp.name, "bad.json")
        with open(bad, "w") as f:
            json.dump({"iterations": [{"t_s": 1}]}, f)
            f.write(",")
        self.assert_fails([bad], 2, f"plot-timeline: {bad}: not valid JSON (line 1, column 29: Extra data)")
        missing = os.path.join(self.tmp.name, "missing.json")
        self.assert_fails([missing], 2, f"plot-timeline: {missing}: cannot read (No such file or directory)")
        self.assert_fails([FIXTURE, "--compare", "healthy=" + bad], 2,
                          f"plot-timeline: {bad}: not valid JSON (line 1, column 29: Extra data)")
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "bad-timeline.png")))

    def test_bad_arguments_exit_2(self):
        r = self.run_cli(FIXTURE, "--compare", FIXTURE)
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected LABEL=REPORT.json", r.stderr)
        r = self.run_cli(FIXTURE, "--window-s", "0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("must be a positive number of seconds", r.stderr)

    def test_unwritable_output_exits_1(self):
        prefix = os.path.join(self.tmp.name, "no-such-dir", "x")
        self.assert_fails([FIXTURE, "--out", prefix], 1,
                          f"plot-timeline: cannot write {prefix}.png / .svg: No such file or directory")


if __name__ == "__main__":
    if importlib.util.find_spec("matplotlib") is None:
        print("matplotlib is missing (scripts/deps installs python3-matplotlib): skipped")
        sys.exit(77)
    unittest.main()
