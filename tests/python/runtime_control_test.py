"""Run-time control of a running job: greyhoundctl set, pause-detection and resume-detection.

usage: /usr/bin/python3 runtime_control_test.py GREYHOUND_SIMCLUSTER GREYHOUNDCTL

An 8-rank simulated job (TP2 x DP2 x PP2) under greyhound on a private redis-server, with three slowdowns of
rank 3's GPU (1.5x: well over the default 10 % validation ratio):
  - before the first, `greyhoundctl set validation_ratio=1.8`: the agents require 80 %, so it goes unreported;
  - then the setting is unset and detection paused: the second goes unreported too;
  - then detection resumes: the third is reported, as it would have been without any of this.
Every agent shows each new settings version in its heartbeat within two of its cycles (one heartbeat a
second), and the master in /metrics, read through `greyhoundctl status --json` and the master's HTTP endpoint.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "megatron"))
import support  # noqa: E402

SIMCLUSTER, CTL = None, None
JOB = "ctljob"
# (start, end) of each fault, job seconds; the controls go in between.
FAULTS = [(14, 22), (32, 40), (54, 64)]


def ctl(redis, command, *args):
    out = subprocess.run([CTL, command, "--job", JOB, "--redis", redis.url] + list(args), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=30)
    assert out.returncode == 0, (command, args, out.stderr)
    return out.stdout.decode()


class RuntimeControl(unittest.TestCase):
    def test_set_pause_and_resume_detection(self):
        redis = support.RedisServer()
        d = tempfile.mkdtemp(prefix="gh-py-ctl-")
        port = support.free_port()
        with open(os.path.join(d, "faults.json"), "w") as f:
            json.dump({"faults": [{"kind": "gpu", "rank": 3, "start_s": a, "end_s": b, "slowdown": 1.5} for a, b in FAULTS]}, f)
        sim = subprocess.Popen([SIMCLUSTER, "--tp", "2", "--dp", "2", "--pp", "2", "--gpus-per-node", "2", "--microbatches",
                                "8", "--duration-s", "72", "--quiet", "--job", JOB, "--redis", redis.url, "--work-dir",
                                os.path.join(d, "sim"), "--faults", os.path.join(d, "faults.json"), "--report",
                                os.path.join(d, "report.json"), "--master-args", "--http 127.0.0.1:%d" % port],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            start = time.time()  # within a second of the job's clock origin

            def at(t):
                time.sleep(max(0.0, t - (time.time() - start)))

            def applied(version):
                """Seconds until every agent's heartbeat and the master report settings `version`."""
                t0 = time.time()

                def everyone():
                    nodes = json.loads(ctl(redis, "status", "--json"))["nodes"]
                    agents = [n.get("settings_version") for n in nodes if n.get("alive")]
                    try:
                        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2) as r:
                            text = r.read().decode()
                    except OSError:
                        return False
                    master = 'greyhound_settings_version{job="%s"} %d\n' % (JOB, version) in text
                    return len(agents) == 4 and all(v == version for v in agents) and master
                support.wait_for("settings version %d everywhere" % version, everyone, timeout_s=10, every_s=0.1)
                return time.time() - t0

            at(6)
            self.assertEqual(json.loads(ctl(redis, "set", "validation_ratio=1.8"))["validation_ratio"], 1.8)
            self.assertLess(applied(1), 2.5, "the agents apply a setting at their next heartbeat")
            at(FAULTS[0][1] + 4)
            settings = json.loads(ctl(redis, "set", "validation_ratio="))
            self.assertNotIn("validation_ratio", settings)
            self.assertTrue(json.loads(ctl(redis, "pause-detection"))["detection_paused"])
            self.assertLess(applied(3), 2.5)
            status = json.loads(ctl(redis, "status", "--json"))
            self.assertTrue(status["settings"]["detection_paused"])
            self.assertTrue(all(n["detection_paused"] for n in status["nodes"] if n.get("alive")))
            at(FAULTS[1][1] + 4)
            self.assertNotIn("detection_paused", json.loads(ctl(redis, "resume-detection")))
            self.assertLess(applied(4), 2.5)
            out = sim.communicate(timeout=180)[0].decode(errors="replace")
            self.assertEqual(sim.returncode, 0, out[-3000:])
        finally:
            if sim.poll() is None:
                sim.kill()
                sim.wait()
        with open(os.path.join(d, "report.json")) as f:
            report = json.load(f)
        onsets = [e["t_s"] for e in report["events"] if e["type"] == "slowdown"]
        during = [[t for t in onsets if a - 2 <= t <= b] for a, b in FAULTS]
        self.assertEqual(during[0], [], "a 1.5x slowdown is not an 80 % change")
        self.assertEqual(during[1], [], "detection was paused")
        self.assertGreater(len(during[2]), 0, "detection resumed: %s" % onsets)
        opened = [e for e in report["events"] if e["type"] == "incident_open"]
        self.assertEqual(len(opened), 1, opened)
        redis.stop()


if __name__ == "__main__":
    SIMCLUSTER, CTL = sys.argv[1:3]
    del sys.argv[1:3]
    unittest.main(verbosity=2)
