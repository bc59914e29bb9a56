"""A master that fell behind its job's event stream further than the stream keeps says so.

usage: /usr/bin/python3 master_stream_gap_test.py GREYHOUND_MASTER

The stream keeps about 100,000 entries (a 10,000-rank job writes that in a minute or two of an incident): a
master stopped longer finds the entries after its cursor trimmed. Here its stored cursor is entry 2 of 10 and
the stream was trimmed to entries 5..9: the master logs the gap, counts it in its state (event_gaps) and in
/metrics (greyhound_event_gaps_total), consumes what is left, and a master started again later, its cursor at
the stream's end, reports no new gap.
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
import support  # noqa: E402  (a private redis-server, free ports, waiting)

MASTER = None
JOB = "gapjob"
EVENTS = "gh:v1:{%s}:events" % JOB
STATE = "gh:v1:{%s}:master" % JOB


class StreamGap(unittest.TestCase):
    def setUp(self):
        self.redis = support.RedisServer()
        self.r = self.redis.client
        self.log = tempfile.NamedTemporaryFile(prefix="gh-gap-master-", suffix=".log", delete=False)
        self.master = None

    def tearDown(self):
        self.stop_master()
        self.redis.stop()
        self.log.close()
        os.unlink(self.log.name)

    def start_master(self):
        self.port = support.free_port()
        self.master = subprocess.Popen([MASTER, "--job", JOB, "--redis", self.redis.url, "--poll-ms", "50",
                                        "--baseline-every-s", "0", "--http", str(self.port)],
                                       stdout=self.log, stderr=subprocess.STDOUT)

    def stop_master(self):
        if self.master is not None and self.master.poll() is None:
            self.master.terminate()
            self.master.wait(timeout=10)
        self.master = None

    def state(self):
        text = self.r.get(STATE)
        return json.loads(text) if text else {}

    def metric(self, name):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port, timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + '{job="%s"}' % JOB):
                    return float(line.split()[-1])
        return None

    def test_a_trimmed_past_cursor_is_logged_counted_and_not_reported_again(self):
        ids = [self.r.xadd(EVENTS, {"json": json.dumps({"type": "agent_start", "t_s": i, "source": "agent:0",
                                                          "node": 0})}) for i in range(10)]
        self.r.set(STATE, json.dumps({"cursor": ids[2], "state": "healthy"}))
        self.r.xtrim(EVENTS, maxlen=5, approximate=False)  # entries 3 and 4 are gone unread
        self.start_master()
        support.wait_for("the master at the stream's end",
                         lambda: self.state().get("cursor") == ids[-1] and self.state().get("event_gaps") == 1, 20)
        self.assertEqual(self.state()["events_processed"], 5)
        support.wait_for("greyhound_event_gaps_total 1", lambda: self.metric("greyhound_event_gaps_total") == 1, 20)
        self.stop_master()
        with open(self.log.name) as f:
            self.assertIn("the event stream was trimmed past the master's cursor " + ids[2], f.read())

        # Started again with its cursor at the end: more events, more trimming of what it read, no new gap.
        for i in range(10):
            self.r.xadd(EVENTS, {"json": json.dumps({"type": "agent_start", "t_s": 10 + i, "source": "agent:0",
                                                     "node": 0})})
        self.r.xtrim(EVENTS, maxlen=11, approximate=False)  # entries 5..8, all read, are gone; its cursor (9) is the oldest left
        self.start_master()
        last = self.r.xrevrange(EVENTS, count=1)[0][0]
        support.wait_for("the master at the stream's end again", lambda: self.state().get("cursor") == last, 20)
        time.sleep(0.3)
        self.assertEqual(self.state()["event_gaps"], 1)
        self.assertEqual(self.state()["events_processed"], 15)


if __name__ == "__main__":
    MASTER = sys.argv.pop(1)
    unittest.main()
