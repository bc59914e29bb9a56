"""A real greyhound-master's S2 plan, driven by a simulated incident, taken by a 4-rank gloo job's PlanFollower.

usage: /usr/bin/python3 master_test.py GREYHOUND_MASTER GREYHOUND_SIMCLUSTER
greyhound-simcluster runs a DP2 x PP2 job (hook, agents) with a GPU 2.5x slower on rank 1 against a private
redis-server and an external greyhound-master with --mitigate; it applies no plans itself. The Python job
(rank_loop.py, the same shape) publishes the layout the master plans against: the master's S2 plan reaches
every rank at one iteration boundary and every rank acknowledges it (the master's plan_applied). The
simulated job runs until then (at most 120 s), however long a loaded machine takes to get there. It does not
change, so the master finds that the split does not pay and reverts it: a revert that comes before the run
stops is followed too.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

import support

MASTER, SIMCLUSTER = None, None
JOB = "pyjob"


class MasterPlans(unittest.TestCase):
    def test_the_masters_plans_are_followed(self):
        redis = support.RedisServer()
        d = tempfile.mkdtemp(prefix="gh-py-master-")
        procs, logs = [], []

        def start(argv, log_name):
            f = open(os.path.join(d, log_name), "w")
            logs.append(f)
            procs.append(subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT))
            return procs[-1]

        try:
            with open(os.path.join(d, "faults.json"), "w") as f:
                json.dump({"faults": [{"kind": "gpu", "rank": 1, "start_s": 6, "end_s": 60, "slowdown": 2.5}]}, f)
            master = start([MASTER, "--job", JOB, "--redis", redis.url, "--mitigate", "--poll-ms", "50",
                            "--event-log", os.path.join(d, "master-events.jsonl")], "master.log")
            ranks = [start([sys.executable, os.path.join(support.HERE, "rank_loop.py"), str(r), "4",
                            os.path.join(d, "init"), JOB, redis.url, d, "2"], "rank-%d.log" % r) for r in range(4)]
            # The simulated job runs until every rank has acknowledged the master's first plan (at most
            # 120 s): how long detection, localisation and planning take depends on the machine's load, so
            # the run is not cut at a fixed length that a loaded machine may not reach the plan within.
            sim_out = open(os.path.join(d, "sim.log"), "w")
            logs.append(sim_out)
            sim = subprocess.Popen([SIMCLUSTER, "--tp", "1", "--dp", "2", "--pp", "2", "--gpus-per-node", "2",
                                    "--microbatches", "4", "--duration-s", "120", "--quiet", "--job", JOB,
                                    "--redis", redis.url, "--external-master", "--work-dir", os.path.join(d, "sim"),
                                    "--report", os.path.join(d, "report.json"), "--faults",
                                    os.path.join(d, "faults.json")], stdout=sim_out, stderr=subprocess.STDOUT)
            procs.append(sim)
            try:
                support.wait_for("the master's first plan applied by every rank",
                                 lambda: sim.poll() is not None or self.first_plan_applied(d), timeout_s=150, every_s=0.2)
            except AssertionError:
                pass  # judged below, with the master's log
            if sim.poll() is None:
                sim.send_signal(signal.SIGINT)  # the cluster stops its ranks and agents and exits 130
            self.assertIn(sim.wait(timeout=60), (0, 130), self.read(d, "sim.log")[-3000:])
            open(os.path.join(d, "stop"), "w").close()
            for p in ranks:
                self.assertEqual(p.wait(timeout=60), 0, self.read(d, "rank-0.log"))
            self.assertIsNone(master.poll(), "the master died:\n" + self.read(d, "master.log"))

            events = self.events(d)
            plans = [e["detail"] for e in events if e["type"] == "plan"]
            applied = [e["detail"] for e in events if e["type"] == "plan_applied"]
            self.assertTrue(plans, "the master planned nothing:\n" + self.why_no_plan(d, events))
            s2 = plans[0]
            self.assertEqual((s2["strategy"], s2["action"]), ("S2", "apply"), s2)
            self.assertEqual(sum(s2["microbatches"]), 8)
            self.assertGreater(s2["microbatches"][0], s2["microbatches"][1], "replica 1 holds the slow GPU")
            self.assertTrue(any(a["epoch"] == s2["epoch"] and a["applied"] == 4 for a in applied), applied)

            results = [json.loads(self.read(d, "rank-%d.json" % r)) for r in range(4)]
            first = [r["switches"][0] for r in results]
            self.assertEqual(len({s["iteration"] for s in first}), 1, first)  # one boundary for every rank
            for rank, s in enumerate(first):
                self.assertEqual(s["allocation"], s2["microbatches"])
                self.assertEqual(s["num_microbatches"], s2["microbatches"][rank % 2])
                self.assertAlmostEqual(s["loss_scale"], 2 * s2["microbatches"][rank % 2] / 8)
            # The revert, when it came in time, is followed the same way.
            reverts = [p for p in plans if p["action"] == "revert"]
            if reverts and any(a["epoch"] == reverts[0]["epoch"] for a in applied):
                for r in results:
                    self.assertEqual(r["switches"][1]["allocation"], [4, 4])
            print("S2 plan %s (epoch %d) in force from iteration %d on all 4 ranks; %d plan(s), %d applied" %
                  (s2["microbatches"], s2["epoch"], first[0]["iteration"], len(plans), len(applied)))
        finally:
            open(os.path.join(d, "stop"), "w").close()
            for p in procs:
                if p.poll() is None:
                    p.terminate()
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
            for f in logs:
                f.close()
            redis.stop()
            shutil.rmtree(d, ignore_errors=True)

    @staticmethod
    def events(d):
        out = []
        for line in MasterPlans.read(d, "master-events.jsonl").splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line being written
            e = e.get("emitted", e.get("event"))
            if e:
                out.append(e)
        return out

    @staticmethod
    def why_no_plan(d, events):
        """What the master decided on the way (its fail-slow and S2 lines) and what each localisation read
        (cause, culprit, the replicas' times per slot, the window's pace spread), then its log's tail."""
        decisions = [l for l in MasterPlans.read(d, "master.log").splitlines() if "fail-slow" in l or "S2" in l]
        reads = []
        for e in events:
            if e.get("type") != "localised":
                continue
            x = e.get("detail", {})
            reads.append("localised %s: cause %s culprit %s (replica %s) replica_ms_per_microbatch %s skew %s "
                         "pace_spread %s" % (x.get("request"), x.get("cause"), x.get("culprit"),
                                             x.get("culprit_replica"), x.get("replica_ms_per_microbatch"),
                                             x.get("replica_skew"), x.get("pace_spread", 1.0)))
        return "\n".join(decisions[-40:] + reads[-20:]) + "\n--- master.log tail ---\n" + \
            MasterPlans.read(d, "master.log")[-2000:]

    @staticmethod
    def first_plan_applied(d):
        events = MasterPlans.events(d)
        plans = [e["detail"] for e in events if e.get("type") == "plan"]
        return bool(plans) and any(e.get("type") == "plan_applied" and e["detail"].get("epoch") == plans[0].get("epoch")
                                   and e["detail"].get("applied") == 4 for e in events)

    @staticmethod
    def read(d, name):
        try:
            with open(os.path.join(d, name)) as f:
                return f.read()
        except OSError as e:
            return str(e)


if __name__ == "__main__":
    SIMCLUSTER = sys.argv.pop(2)
    MASTER = sys.argv.pop(1)
    unittest.main(verbosity=2)
