"""An operator's manual plan on a running job: greyhoundctl plan --microbatches, --revert and --release.

usage: /usr/bin/python3 operator_plan_test.py GREYHOUND_SIMCLUSTER GREYHOUNDCTL

An 8-rank simulated job (TP2 x DP2 x PP2, 8 micro-batches per replica: a global batch of 16) under greyhound
with --mitigate on a private redis-server; rank 3's GPU at 1/1.5 from 12 s to the end:
  - at 5 s the operator splits 6,10: published as the job's next plan and applied by every rank within a
    few seconds; a split that changes the global batch, or names the wrong number of replicas, is refused
    with the reason and changes nothing;
  - while the operator's plan stands, greyhound proposes no plan of its own, though the slow GPU is
    detected and localised;
  - at 30 s the operator reverts (a revert plan), at 34 s releases: greyhound's own remedy for the slow GPU
    follows. `greyhoundctl status --json` shows the request and the answer throughout.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "megatron"))
import support  # noqa: E402

SIMCLUSTER, CTL = None, None
JOB = "opjob"


def ctl(redis, command, *args, expect=0):
    out = subprocess.run([CTL, command, "--job", JOB, "--redis", redis.url] + list(args), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=60)
    assert out.returncode == expect, (command, args, out.returncode, out.stdout, out.stderr)
    return out.stdout.decode() + out.stderr.decode()


def step(what):
    """Progress on stderr as it happens (a run that hangs shows where)."""
    sys.stderr.write("operator_plan: %s\n" % what)
    sys.stderr.flush()


def events(redis, kind):
    out = ctl(redis, "events", "--json", "--count", "100000")
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [r.get("event", r) for r in rows if r.get("event", r).get("type") == kind]


class OperatorPlan(unittest.TestCase):
    def test_plan_revert_and_release(self):
        redis = support.RedisServer()
        d = tempfile.mkdtemp(prefix="gh-py-op-")
        with open(os.path.join(d, "faults.json"), "w") as f:
            json.dump({"faults": [{"kind": "gpu", "rank": 3, "start_s": 12, "end_s": 200, "slowdown": 1.5}]}, f)
        sim = subprocess.Popen([SIMCLUSTER, "--tp", "2", "--dp", "2", "--pp", "2", "--gpus-per-node", "2", "--microbatches",
                                "8", "--duration-s", "60", "--quiet", "--job", JOB, "--redis", redis.url, "--work-dir",
                                os.path.join(d, "sim"), "--faults", os.path.join(d, "faults.json"), "--report",
                                os.path.join(d, "report.json"), "--mitigate"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            start = time.time()

            def at(t):
                time.sleep(max(0.0, t - (time.time() - start)))

            def applied(epoch):
                return any(e["detail"].get("epoch") == epoch for e in events(redis, "plan_applied"))

            at(5)
            step("the operator's split at %.1f s" % (time.time() - start))
            out = ctl(redis, "plan", "--microbatches", "6,10", "--reason", "node 1 is on a slow PSU")
            self.assertIn("published as plan", out)
            self.assertIn("the job applied it: all 8 ranks, from iteration", out)  # it waits for the job's answer
            epoch = int(out.split("published as plan ")[1].split(":")[0])
            t0 = time.time()
            support.wait_for("plan %d applied" % epoch, lambda: applied(epoch), timeout_s=15, every_s=0.2)
            self.assertLess(time.time() - t0, 10)
            status = json.loads(ctl(redis, "status", "--json"))
            self.assertEqual(status["operator_plan"]["request"]["microbatches"], [6, 10])
            self.assertEqual(status["operator_plan"]["answer"]["state"], "published")
            self.assertTrue(status["operator_plan"]["holds"])
            # Refused with the reason, nothing published.
            self.assertIn("global batch is 16", ctl(redis, "plan", "--microbatches", "6,6", expect=2))
            self.assertIn("2 DP replicas", ctl(redis, "plan", "--microbatches", "16", expect=2))
            self.assertIn("one of", ctl(redis, "plan", "--revert", "--release", expect=2))
            step("refusals checked at %.1f s" % (time.time() - start))
            at(30)
            plans = [e for e in events(redis, "plan")]
            mine = [p for p in plans if p["detail"]["reason"].startswith("operator's plan")]
            self.assertEqual(len(mine), 1, plans)
            self.assertEqual(plans, mine, "greyhound proposed a plan of its own while the operator's stood")
            self.assertGreater(len(events(redis, "fail_slow_open")), 0, "the slow GPU is still detected and localised")
            out = ctl(redis, "plan", "--revert")
            epoch = int(out.split("published as plan ")[1].split(":")[0])
            support.wait_for("revert %d applied" % epoch, lambda: applied(epoch), timeout_s=15, every_s=0.2)
            at(34)
            step("revert applied, release at %.1f s" % (time.time() - start))
            self.assertIn("greyhound's own remedies again", ctl(redis, "plan", "--release"))
            self.assertFalse(json.loads(ctl(redis, "status", "--json"))["operator_plan"]["holds"])
            step("waiting for the job to end at %.1f s" % (time.time() - start))
            out = sim.communicate(timeout=120)[0].decode(errors="replace")
            self.assertEqual(sim.returncode, 0, out[-3000:])
            plans = events(redis, "plan")
        finally:
            if sim.poll() is None:  # the launcher and what shares its session (their output pipe is ours)
                os.killpg(sim.pid, signal.SIGKILL)
                sim.wait()
            redis.stop()
        ours = [p for p in plans if not p["detail"]["reason"].startswith("operator's plan")]
        self.assertGreater(len(ours), 0, "after the release greyhound's own remedy follows: %s" % plans)
        self.assertTrue(all(p["t_s"] > 34 for p in ours), ours)
        self.assertEqual(plans[1]["detail"]["action"], "revert")
        with open(os.path.join(d, "sim", "rank0.out")) as f:
            lines = f.read()
        self.assertIn("6 micro-batches on this replica", lines)


if __name__ == "__main__":
    SIMCLUSTER, CTL = sys.argv[1:3]
    del sys.argv[1:3]
    unittest.main(verbosity=2)
