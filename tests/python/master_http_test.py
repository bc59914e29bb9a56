"""The master's HTTP endpoint (greyhound-master --http) serving a simulated job.

usage: /usr/bin/python3 master_http_test.py GREYHOUND_MASTER GREYHOUND_SIMCLUSTER GREYHOUNDCTL

A greyhound-master with --mitigate and --http serves an 8-rank simulated job (TP2 x DP2 x PP2, rank 3's GPU at
1/1.5 from 15 to 40 s) on a private redis-server. While the job runs, /metrics is scraped and parsed with
prometheus_client's text parser (Debian's python3-prometheus-client), and clients that send nothing, send too
much or ask for what is not there are tried: none of them holds the others up or stops the master. Once the
job is over: the metrics counted its detection, localisation, fail-slow and S2 plan (and no communication
fail-slow, no S3: only a GPU was slow), /status is exactly what
`greyhoundctl status --json` prints (but for the ages, which count from the moment of the read), and
`greyhoundctl events` (followed while the job ran, and after) and `greyhoundctl incidents` tell its story.
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "megatron"))
import support  # noqa: E402  (a private redis-server, free ports, waiting)

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

MASTER, SIMCLUSTER, CTL = None, None, None
JOB = "opsjob"


def get(port, path, timeout=5.0):
    """(status, body) of GET path."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def parse_metrics(text):
    """{(sample name, frozenset(labels)): value}, through the Prometheus text parser (which raises on bad text)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def samples(metrics, name, **labels):
    want = set(labels.items())
    return {k[1]: v for k, v in metrics.items() if k[0] == name and want <= set(k[1])}


def without_ages(j):
    if isinstance(j, dict):
        return {k: without_ages(v) for k, v in j.items() if k not in ("age_s", "heartbeat_age_s")}
    if isinstance(j, list):
        return [without_ages(v) for v in j]
    return j


class MasterHttp(unittest.TestCase):
    def test_metrics_status_and_what_clients_cannot_do(self):
        redis = support.RedisServer()
        d = tempfile.mkdtemp(prefix="gh-py-http-")
        port = support.free_port()
        log = open(os.path.join(d, "master.log"), "w")
        master = subprocess.Popen([MASTER, "--job", JOB, "--redis", redis.url, "--mitigate", "--poll-ms", "50",
                                   "--http", "127.0.0.1:%d" % port], stdout=log, stderr=subprocess.STDOUT)
        sim = follow = None
        try:
            support.wait_for("the master's /healthz", lambda: self.healthy(port), timeout_s=20)
            with open(os.path.join(d, "faults.json"), "w") as f:
                json.dump({"faults": [{"kind": "gpu", "rank": 3, "start_s": 15, "end_s": 40, "slowdown": 1.5}]}, f)
            follow = subprocess.Popen([CTL, "events", "--job", JOB, "--redis", redis.url, "--follow"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            sim = subprocess.Popen([SIMCLUSTER, "--tp", "2", "--dp", "2", "--pp", "2", "--gpus-per-node", "2",
                                    "--microbatches", "8", "--duration-s", "45", "--quiet", "--job", JOB, "--redis",
                                    redis.url, "--external-master", "--mitigate", "--work-dir",
                                    os.path.join(d, "sim"), "--faults", os.path.join(d, "faults.json")],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            # While the job runs: scraped and parsed every 2 s; the agents' samples while they are alive.
            seen_agents = False
            tried_clients = False
            while sim.poll() is None:
                status, text = get(port, "/metrics")
                self.assertEqual(status, 200, text)
                m = parse_metrics(text)
                self.assertEqual(m[("greyhound_master_up", frozenset())], 1)
                read = samples(m, "greyhound_ring_records_read_total", job=JOB)
                if read and sum(read.values()) > 0:
                    seen_agents = True
                    self.assertEqual(len(samples(m, "greyhound_agent_up", job=JOB)), 4)
                if not tried_clients:
                    self.hostile_clients(port)
                    tried_clients = True
                time.sleep(2)
            out = sim.stdout.read().decode(errors="replace")
            self.assertEqual(sim.returncode, 0, out[-3000:])
            self.assertTrue(seen_agents, "no scrape saw the agents' records")
            self.assertIsNone(master.poll(), "the master died")

            status, text = get(port, "/metrics")
            self.assertEqual(status, 200)
            m = parse_metrics(text)
            self.assertGreaterEqual(m[("greyhound_detections_total", frozenset({("job", JOB)}))], 1, text)
            self.assertGreaterEqual(sum(samples(m, "greyhound_fail_slows_total", job=JOB).values()), 1, text)
            self.assertGreaterEqual(sum(samples(m, "greyhound_localisations_total", job=JOB).values()), 1, text)
            s2 = samples(m, "greyhound_plans_total", job=JOB, strategy="S2", outcome="applied")
            self.assertTrue(s2 and sum(s2.values()) >= 1, text)
            # Only a GPU was slow: no link named, no placement moved (the profile window the GPU recovered in,
            # under the split, shows its groups' waiting moved from one member to the other: it opens nothing).
            comm = samples(m, "greyhound_fail_slows_total", job=JOB, cause="communication")
            self.assertEqual(sum(comm.values()), 0, text)
            self.assertFalse(samples(m, "greyhound_plans_total", job=JOB, strategy="S3"), text)
            count = m[("greyhound_detection_latency_seconds_count", frozenset({("job", JOB)}))]
            total = m[("greyhound_detection_latency_seconds_sum", frozenset({("job", JOB)}))]
            self.assertGreaterEqual(count, 1)
            self.assertTrue(0 < total / count < 20, (total, count))
            self.assertEqual(len(samples(m, "greyhound_rank_iteration_seconds", job=JOB)), 8)
            self.assertTrue(samples(m, "greyhound_group_collective_seconds", job=JOB), text)
            bw = samples(m, "greyhound_group_bus_bandwidth_gbps", job=JOB)
            self.assertTrue(bw and max(bw.values()) > 0, text)
            self.assertEqual(len(samples(m, "greyhound_microbatches", job=JOB)), 2)
            # Every metric the project's Grafana dashboard plots is one the master exports.
            families = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
            with open(os.path.join(ROOT, "deploy", "grafana", "greyhound-dashboard.json")) as f:
                dashboard = json.load(f)
            plotted = set()
            for p in dashboard["panels"]:
                for t in p["targets"]:
                    plotted |= set(re.findall(r"greyhound_[a-z_]+", t["expr"]))
            plotted = {re.sub(r"_(sum|count)$", "", n) if n.endswith(("_seconds_sum", "_seconds_count")) else n
                       for n in plotted}
            self.assertTrue(plotted)
            self.assertEqual(plotted - families, set())

            # /status is greyhoundctl status --json, read at (nearly) the same moment: the ages aside, and
            # tried a few times in case a heartbeat expired between the two reads.
            last = None
            for _ in range(10):
                code, body = get(port, "/status")
                self.assertEqual(code, 200, body)
                ctl = subprocess.run([CTL, "status", "--job", JOB, "--redis", redis.url, "--json"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
                self.assertEqual(ctl.returncode, 0, ctl.stderr)
                a, b = without_ages(json.loads(body)), without_ages(json.loads(ctl.stdout))
                last = (a, b)
                if a == b:
                    break
                time.sleep(0.5)
            self.assertEqual(last[0], last[1])
            self.assertEqual(last[0]["job"], JOB)
            self.assertEqual(len(last[0]["ranks"]), 8)
            code, body = get(port, "/status?job=other")  # not a job this master serves: no reads for it
            self.assertEqual(code, 404, body)
            self.assertIn("not a job this master serves", body)
            code, body = get(port, "/status?job=a%20b")  # not a job name
            self.assertEqual(code, 400, body)

            # The event stream as the demo's timeline, as JSON lines, and followed while the job ran.
            ctl = subprocess.run([CTL, "events", "--job", JOB, "--redis", redis.url], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, timeout=30)
            self.assertEqual(ctl.returncode, 0, ctl.stderr)
            timeline = ctl.stdout.decode()
            for word in ("DETECT slowdown", "EVENT  incident_open", "LOCATE rank 3", "PLAN   epoch 1 S2 apply",
                         "APPLIED epoch 1"):
                self.assertIn(word, timeline)
            ctl = subprocess.run([CTL, "events", "--job", JOB, "--redis", redis.url, "--json", "--count", "5"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            lines = [json.loads(line) for line in ctl.stdout.decode().splitlines()]
            self.assertEqual(len(lines), 5)
            self.assertTrue(all("id" in e and "type" in e for e in lines), lines)
            follow.terminate()
            followed = follow.communicate(timeout=10)[0].decode()
            self.assertIn("LOCATE rank 3", followed)
            self.assertIn("APPLIED epoch 1", followed)
            ctl = subprocess.run([CTL, "incidents", "--job", JOB, "--redis", redis.url, "--json"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            self.assertEqual(ctl.returncode, 0, ctl.stderr)
            incidents = json.loads(ctl.stdout)
            self.assertGreaterEqual(len(incidents["incidents"]), 1)
            self.assertEqual(incidents["incidents"][0]["id"], 1)
            ctl = subprocess.run([CTL, "incidents", "--job", JOB, "--redis", redis.url], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, timeout=30)
            self.assertIn("#1 ", ctl.stdout.decode())
            ctl = subprocess.run([CTL, "events", "--job", JOB, "--redis", redis.url, "--since", "nope"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            self.assertEqual(ctl.returncode, 2)
            self.assertIn(b"--since", ctl.stderr)
        finally:
            if sim is not None and sim.poll() is None:
                sim.kill()
                sim.wait()
            if follow is not None and follow.poll() is None:
                follow.kill()
                follow.wait()
            master.terminate()
            try:
                master.wait(timeout=10)
            except subprocess.TimeoutExpired:
                master.kill()
            log.close()
            redis.stop()

    @staticmethod
    def healthy(port):
        try:
            return get(port, "/healthz", timeout=1)[0] == 200
        except OSError:
            return False

    def hostile_clients(self, port):
        # A client that connects and sends nothing, and one stuck halfway through its request line.
        silent = socket.create_connection(("127.0.0.1", port))
        stuck = socket.create_connection(("127.0.0.1", port))
        stuck.sendall(b"GET /metr")
        try:
            t0 = time.time()
            code, body = get(port, "/healthz", timeout=2)
            self.assertEqual((code, body), (200, "ok\n"))
            self.assertLess(time.time() - t0, 2)
            # A request far over the header limit: refused, and the master goes on.
            big = socket.create_connection(("127.0.0.1", port))
            try:
                big.sendall(b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")
            except OSError:
                pass  # the master may close before reading it all
            answer = b""
            big.settimeout(5)
            try:
                while True:
                    chunk = big.recv(4096)
                    if not chunk:
                        break
                    answer += chunk
            except OSError:
                pass
            big.close()
            self.assertTrue(answer == b"" or answer.startswith(b"HTTP/1.1 431"), answer[:200])
            self.assertEqual(get(port, "/nothing-here")[0], 404)
            req = urllib.request.Request("http://127.0.0.1:%d/metrics" % port, data=b"x", method="POST")
            with self.assertRaises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=5)
            self.assertEqual(e.exception.code, 405)
            self.assertEqual(get(port, "/healthz")[0], 200)
        finally:
            silent.close()
            stuck.close()


if __name__ == "__main__":
    MASTER, SIMCLUSTER, CTL = sys.argv[1:4]
    del sys.argv[1:4]
    unittest.main(verbosity=2)
