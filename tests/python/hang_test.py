"""Hang: a rank that stops making NCCL calls (a `hang` fault in the simulated cluster: a kernel that does not
finish for 12 s) leaves its peers waiting inside their next collective with it. Its agent and theirs report
`stall` events (the hook's in-call marker says which call each waits in), and the master names the hung
collective once: a `hang` event with the group, the call's number in it, the ranks waiting and the rank it
waits for (the one hung), kept in its state. When the rank goes on, every stall ends and the job finishes.

usage: /usr/bin/python3 hang_test.py SIMCLUSTER
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SIMCLUSTER = None
HANG = (8.0, 20.0)
HUNG_RANK = 5


class Hang(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="gh-py-hang-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_the_master_names_the_rank_a_hung_collective_waits_for(self):
        faults = os.path.join(self.work, "faults.json")
        with open(faults, "w") as f:
            json.dump({"faults": [{"kind": "hang", "rank": HUNG_RANK, "start_s": HANG[0], "end_s": HANG[1]}]}, f)
        report = os.path.join(self.work, "report.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith("GREYHOUND_")}
        r = subprocess.run([SIMCLUSTER, "--tp", "2", "--dp", "2", "--pp", "2", "--gpus-per-node", "4",
                            "--microbatches", "4", "--duration-s", "30", "--quiet", "--faults", faults,
                            "--hang-min-s", "3", "--report", report, "--timeout-s", "60"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240, env=env)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        with open(report) as f:
            rep = json.load(f)
        events = rep["events"]
        hangs = [e for e in events if e["type"] == "hang"]
        stalls = [e for e in events if e["type"] == "stall"]
        ends = [e for e in events if e["type"] == "stall_end"]
        self.assertTrue(hangs, "no hang named; stalls: %s" % stalls)
        # Every hang names rank 5 alone as the one waited for, and no other rank.
        for h in hangs:
            d = h["detail"]
            self.assertEqual(d["missing"], [HUNG_RANK], h)
            self.assertEqual(h["rank"], HUNG_RANK)
            self.assertNotIn(HUNG_RANK, d["waiting"])
            self.assertTrue(d["waiting"], h)
            self.assertGreater(d["seq"], 0)
            self.assertEqual(h["source"], "master")
            # Named after the threshold (3 s) and well before the hang ends.
            self.assertGreater(h["t_s"], HANG[0] + 3.0)
            self.assertLess(h["t_s"], HANG[0] + 3.0 + 6.0)
        # The hung rank itself reported a stall outside NCCL; the ones waiting for it, inside a call.
        own = [s for s in stalls if s["rank"] == HUNG_RANK]
        self.assertEqual(len(own), 1, stalls)
        self.assertFalse(own[0]["detail"]["in_call"])
        self.assertTrue(any(s["detail"]["in_call"] for s in stalls if s["rank"] != HUNG_RANK))
        # Every stall ended when the rank went on, and the job went on to its end.
        self.assertEqual(sorted(s["rank"] for s in stalls), sorted(e["rank"] for e in ends))
        self.assertTrue(all(e["t_s"] >= HANG[1] - 0.5 for e in ends), ends)
        self.assertGreater(rep["iterations"][-1]["t_s"], HANG[1] + 3)
        # No stall before the hang began.
        self.assertTrue(all(s["t_s"] > HANG[0] for s in stalls))


if __name__ == "__main__":
    SIMCLUSTER = sys.argv.pop(1)
    unittest.main()
