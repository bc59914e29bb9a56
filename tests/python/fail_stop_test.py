"""Fail-stop: a rank whose process dies (here killed by SIGKILL in the simulated cluster, a `kill` fault) is
reported by its node's agent as a `fail_stop` event naming the rank, within the launcher's grace; its peers,
which the stand-in NCCL fails with an error once it is gone (exit status 1), are fail-stops too, no earlier
and with their status; ranks that end normally (the hook marks their rings at exit with status 0) are never
reported.

usage: /usr/bin/python3 fail_stop_test.py SIMCLUSTER
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SIMCLUSTER = None
KILL_AT_S = 6.0


def simcluster(work, *more):
    report = os.path.join(work, "report.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GREYHOUND_")}
    r = subprocess.run([SIMCLUSTER, "--tp", "2", "--dp", "2", "--pp", "2", "--gpus-per-node", "4",
                        "--microbatches", "4", "--quiet", "--report", report, "--timeout-s", "60"] + list(more),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=180, env=env)
    with open(report) as f:
        return r, json.load(f)


def fail_stops(report):
    return [e for e in report["events"] if e["type"] == "fail_stop"]


class FailStop(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="gh-py-failstop-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_a_killed_rank_is_reported_first_before_the_launcher_stops_the_rest(self):
        faults = os.path.join(self.work, "faults.json")
        with open(faults, "w") as f:
            json.dump({"faults": [{"kind": "kill", "rank": 5, "start_s": KILL_AT_S}]}, f)
        r, report = simcluster(self.work, "--duration-s", "30", "--faults", faults)
        self.assertEqual(r.returncode, 1, r.stderr[-2000:])
        self.assertIn("rank 5 exited with 137", r.stderr)  # 128 + SIGKILL
        stops = fail_stops(report)
        killed = [e for e in stops if e["rank"] == 5]
        self.assertEqual(len(killed), 1, stops)
        first = killed[0]
        self.assertEqual(first["node"], 1)
        self.assertEqual(first["source"], "agent:1")
        self.assertEqual(first["detail"]["exit_status"], -1)  # it did not exit: killed
        # Seen within the poll of its agent after the kill: before the launcher stops the others 2 s later.
        self.assertGreaterEqual(first["t_s"], KILL_AT_S)
        self.assertLess(first["t_s"], KILL_AT_S + 2.0)
        self.assertGreater(first["detail"]["pid"], 0)
        self.assertLessEqual(first["detail"]["last_record_t_s"], first["t_s"])
        self.assertGreater(first["detail"]["last_record_t_s"], KILL_AT_S - 2.0)
        # The others: failed by the stand-in NCCL once their peer was gone (exit status 1), or stopped by the
        # launcher later; none before it.
        for e in stops:
            if e is first:
                continue
            self.assertGreaterEqual(e["t_s"], first["t_s"], e)
            if e["detail"]["exit_status"] == -1:
                self.assertGreaterEqual(e["t_s"], first["t_s"] + 1.0, e)
            else:
                self.assertEqual(e["detail"]["exit_status"], 1, e)

    def test_ranks_that_end_normally_are_no_fail_stops(self):
        r, report = simcluster(self.work, "--duration-s", "5")
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertGreater(len(report["iterations"]), 5)
        self.assertEqual(fail_stops(report), [])


if __name__ == "__main__":
    SIMCLUSTER = sys.argv.pop(1)
    unittest.main()
