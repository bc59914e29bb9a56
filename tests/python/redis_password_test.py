"""A Redis that wants a password, given to greyhound-simcluster in its --redis URL: the whole job runs
(master, agents, ranks reach Redis), yet the password appears on no command line of any process it starts,
nor in its banner or report; every process got it from the file GREYHOUND_REDIS_PASSWORD_FILE names.

usage: /usr/bin/python3 redis_password_test.py BIN_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "megatron"))
import support  # noqa: E402  (free ports)

BIN = None
PASSWORD = "pw-9f3c1e77"


def cmdlines_holding(secret, exclude_pid):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == exclude_pid:
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                line = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if secret in line:
            found.append("%s: %s" % (pid, line))
    return found


class RedisPassword(unittest.TestCase):
    def setUp(self):
        import redis
        self.dir = tempfile.mkdtemp(prefix="gh-py-pw-")
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.port = support.free_port()
        # The password goes to redis-server in its configuration file, not on its command line.
        conf = os.path.join(self.dir, "redis.conf")
        with open(conf, "w") as f:
            f.write("port %d\nbind 127.0.0.1\ndir %s\nsave \"\"\nappendonly no\nrequirepass %s\n"
                    % (self.port, self.dir, PASSWORD))
        self.redis = subprocess.Popen([binary, conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client = redis.Redis(host="127.0.0.1", port=self.port, password=PASSWORD, decode_responses=True)
        support.wait_for("redis-server", lambda: self._ping(), timeout_s=10)

    def _ping(self):
        try:
            return self.client.ping()
        except Exception:  # noqa: BLE001  (not up yet)
            return False

    def tearDown(self):
        self.redis.terminate()
        self.redis.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_the_job_runs_and_the_password_is_on_no_command_line(self):
        report = os.path.join(self.dir, "report.json")
        env = {k: v for k, v in os.environ.items() if not k.startswith("GREYHOUND_")}
        p = subprocess.Popen([os.path.join(BIN, "greyhound-simcluster"), "--tp", "2", "--dp", "2", "--pp", "2",
                              "--gpus-per-node", "4", "--microbatches", "4", "--duration-s", "6", "--job", "pwjob",
                              "--redis", "redis://:%s@127.0.0.1:%d/0" % (PASSWORD, self.port), "--report", report],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        leaks = []
        seen_ranks = False
        while p.poll() is None:
            leaks += cmdlines_holding(PASSWORD, p.pid)
            seen_ranks = seen_ranks or bool(cmdlines_holding("greyhound-minitrain", p.pid))
            time.sleep(0.1)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err[-3000:])
        self.assertTrue(seen_ranks, "the ranks were seen running")
        self.assertEqual(leaks, [], "the password is on these command lines")
        self.assertNotIn(PASSWORD, out)
        self.assertIn("Redis redis://127.0.0.1:%d/0" % self.port, out)
        with open(report) as f:
            text = f.read()
        self.assertNotIn(PASSWORD, text)
        # Every side reached Redis: the agents registered the ranks, the master wrote its events.
        events = json.loads(text)["events"]
        self.assertTrue(any(e.get("source", "").startswith("agent:") for e in events), events[:5])
        self.assertTrue(self.client.dbsize() > 0)


if __name__ == "__main__":
    BIN = sys.argv.pop(1)
    unittest.main()
