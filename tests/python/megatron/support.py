"""Helpers for greyhound_megatron's tests: a private redis-server, the package on sys.path, gloo ranks."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class RedisServer:
    """redis-server on a private port in a temporary directory, stopped by stop()."""

    def __init__(self):
        import redis
        self.dir = tempfile.mkdtemp(prefix="gh-py-redis-")
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen([binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                                          "--save", "", "--appendonly", "no", "--daemonize", "no",
                                          "--logfile", os.path.join(self.dir, "redis.log")])
            self.client = redis.Redis(host="127.0.0.1", port=self.port, decode_responses=True)
            deadline = time.time() + 10
            while time.time() < deadline and self.proc.poll() is None:
                try:
                    if self.client.ping():
                        return
                except redis.exceptions.ConnectionError:
                    time.sleep(0.05)
            self.proc.kill()
            self.proc.wait()
        raise RuntimeError("redis-server did not start (run scripts/deps)")

    @property
    def url(self):
        return "redis://127.0.0.1:%d/0" % self.port

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_for(what, predicate, timeout_s=30.0, every_s=0.05):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError("timed out after %.0f s waiting for %s" % (timeout_s, what))


def acks(client, job):
    """rank -> PlanAck dict of plan:acks."""
    return {int(k): json.loads(v) for k, v in client.hgetall("gh:v1:{%s}:plan:acks" % job).items()}


def plan_json(epoch, microbatches, strategy="S2", action="apply", incident=1):
    return json.dumps({"epoch": epoch, "strategy": strategy, "action": action, "incident": incident,
                       "reason": "test", "microbatches": microbatches, "placement": None, "exclude_nodes": [],
                       "exclude_ranks": [], "predicted_iteration_s": 0.0, "t_unix_ms": int(time.time() * 1000)})


class RedisCase(unittest.TestCase):
    """A test case with a private redis-server for the whole class (self.redis)."""

    @classmethod
    def setUpClass(cls):
        cls.redis = RedisServer()

    @classmethod
    def tearDownClass(cls):
        cls.redis.stop()


def rank_results(d, codes, outs):
    """Every rank's d/rank-R.json, once each rank exited 0 (else AssertionError with the failed rank's output)."""
    for code, o in zip(codes, outs):
        if code != 0:
            raise AssertionError("a rank failed:\n" + o)
    results = []
    for r in range(len(codes)):
        with open(os.path.join(d, "rank-%d.json" % r)) as f:
            results.append(json.load(f))
    return results
