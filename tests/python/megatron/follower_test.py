"""PlanFollower on 4 gloo ranks against a private redis-server: plans the test writes as the master would.

usage: /usr/bin/python3 follower_test.py
A good S2 plan is taken by every rank at the same iteration and acknowledged; then a plan key that is not
JSON (logged: it names no epoch to answer), a malformed plan, one of the wrong length and one that changes
the global batch are each turned down with a reason (acknowledged as rejected by every rank) while the job
goes on with the last good allocation; so are an S1 plan that carries another vector and a plan one rank's
own check turns down (every rank rejects it, in the same collective).
"""
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import support

JOB = "pyjob"
WORLD = 4


class FollowerAgainstRedis(unittest.TestCase):
    def setUp(self):
        self.redis = support.RedisServer()
        self.r = self.redis.client
        self.dir = tempfile.mkdtemp(prefix="gh-follower-")
        init = os.path.join(self.dir, "init")
        env = dict(os.environ, GH_TEST_REFUSE="2:4")  # rank 2 alone turns down [4, ...]
        self.procs = [subprocess.Popen([sys.executable, os.path.join(support.HERE, "rank_loop.py"), str(rank),
                                        str(WORLD), init, JOB, self.redis.url, self.dir], env=env,
                                       stderr=self.log_file(rank)) for rank in range(WORLD)]

    def log_file(self, rank):
        f = open(os.path.join(self.dir, "rank-%d.log" % rank), "w")
        self.addCleanup(f.close)
        return f

    def tearDown(self):
        open(os.path.join(self.dir, "stop"), "w").close()
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        self.redis.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def read(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return f.read()

    def logs(self):
        return "\n".join(self.read("rank-%d.log" % r) for r in range(WORLD))

    def finish(self):
        open(os.path.join(self.dir, "stop"), "w").close()
        for p in self.procs:
            self.assertEqual(p.wait(timeout=30), 0, self.logs())
        return [json.loads(self.read("rank-%d.json" % r)) for r in range(WORLD)]

    def wait_acks(self, epoch, status):
        def all_acked():
            a = support.acks(self.r, JOB)
            return a if len(a) == WORLD and all(v["epoch"] == epoch for v in a.values()) else None
        a = support.wait_for("acks of epoch %d" % epoch, all_acked)
        for rank, ack in a.items():
            self.assertEqual(ack["status"], status, ack)
        return a

    def test_plans_good_and_bad(self):
        layout = json.loads(support.wait_for("the layout", lambda: self.r.get("gh:v1:{%s}:layout" % JOB)))
        self.assertEqual((layout["tp"], layout["dp"], layout["pp"], layout["world"]), (1, 4, 1, 4))
        self.assertEqual(layout["microbatches"], [2, 2, 2, 2])
        self.assertEqual(layout["capabilities"], ["S2"])

        self.r.set("gh:v1:{%s}:plan" % JOB, support.plan_json(1, [3, 1, 2, 2]))
        applied = self.wait_acks(1, "applied")
        self.assertEqual(len({a["iteration"] for a in applied.values()}), 1, applied)  # one boundary for all
        self.assertIn("3 of 8 micro-batches on DP replica 0", applied[0]["detail"])
        support.wait_for("the layout naming the new allocation", lambda: json.loads(
            self.r.get("gh:v1:{%s}:layout" % JOB))["microbatches"] == [3, 1, 2, 2])

        self.r.set("gh:v1:{%s}:plan" % JOB, "{\"epoch\": 2, \"strategy\": ")  # not a plan at all
        support.wait_for("the unreadable plan logged", lambda: "ignoring the plan key" in self.read("rank-0.log"))
        self.r.set("gh:v1:{%s}:plan" % JOB, json.dumps({"epoch": 2, "strategy": "S9", "microbatches": [3, 1, 2, 2]}))
        malformed = self.wait_acks(2, "rejected")
        for ack in malformed.values():
            self.assertIn("strategy", ack["detail"])
        self.r.set("gh:v1:{%s}:plan" % JOB, support.plan_json(3, [4, 2, 2]))
        rejected = self.wait_acks(3, "rejected")
        self.assertIn("micro", rejected[2]["detail"])
        self.r.set("gh:v1:{%s}:plan" % JOB, support.plan_json(4, [3, 3, 2, 2]))
        rejected = self.wait_acks(4, "rejected")
        for ack in rejected.values():
            self.assertIn("global batch", ack["detail"])
        self.r.set("gh:v1:{%s}:plan" % JOB, support.plan_json(5, [2, 2, 2, 2], strategy="S1"))
        rejected = self.wait_acks(5, "rejected")
        for ack in rejected.values():
            self.assertIn("only S2 does", ack["detail"])
        # One rank's own check turns a plan down: every rank does, in the same collective (no rank switches).
        self.r.set("gh:v1:{%s}:plan" % JOB, support.plan_json(6, [4, 2, 1, 1]))
        rejected = self.wait_acks(6, "rejected")
        self.assertIn("rank 2 refuses [4, 2, 1, 1]", rejected[2]["detail"])
        for rank in (0, 1, 3):
            self.assertIn("another rank turned it down", rejected[rank]["detail"])
        time.sleep(0.3)
        ranks = self.finish()

        switch_at = applied[0]["iteration"]
        for rank, r in enumerate(ranks):
            self.assertEqual(len(r["switches"]), 1, r["switches"])
            s = r["switches"][0]
            self.assertEqual(s["iteration"], switch_at)
            self.assertEqual(s["allocation"], [3, 1, 2, 2])
            self.assertEqual(s["num_microbatches"], [3, 1, 2, 2][rank])
            self.assertEqual(s["offset"], [0, 3, 4, 6][rank])
            self.assertAlmostEqual(s["loss_scale"], [1.5, 0.5, 1.0, 1.0][rank])
            self.assertTrue(all(h == [2, 2, 2, 2] for h in r["history"][:switch_at]))
            self.assertTrue(all(h == [3, 1, 2, 2] for h in r["history"][switch_at:]), "the last good one stays")
            self.assertIn("turned it down" if rank != 2 else "refuses", r["rejection"])
        print("switched at iteration %d of %d on every rank" % (switch_at, len(ranks[0]["history"])))


class PollEvery(unittest.TestCase):
    def test_a_plan_waits_for_the_next_polled_iteration(self):
        from greyhound_megatron import PlanFollower
        redis = support.RedisServer()
        try:
            f = PlanFollower("every", 1, 0, [4], redis_url=redis.url, rank=0, world_size=1, background=False, poll_every=3)
            self.assertFalse(f.poll(0))
            redis.client.set("gh:v1:{every}:plan", support.plan_json(1, [4], strategy="S1"))
            self.assertFalse(f.poll(1))
            self.assertFalse(f.poll(2))
            self.assertEqual(support.acks(redis.client, "every"), {})
            self.assertTrue(f.poll(3))
            self.assertEqual(support.acks(redis.client, "every")[0]["iteration"], 3)
            f.close()
        finally:
            redis.stop()


class Accept(unittest.TestCase):
    def test_the_jobs_own_check_turns_a_plan_down(self):
        from greyhound_megatron import PlanFollower
        redis = support.RedisServer()
        try:
            f = PlanFollower("accept", 1, 0, [4], redis_url=redis.url, rank=0, world_size=1, background=False,
                             accept=lambda counts: "the schedule needs a multiple of 3, not %d" % counts[0])
            self.assertFalse(f.poll(0))
            redis.client.set("gh:v1:{accept}:plan", support.plan_json(1, [4], strategy="S1"))
            self.assertFalse(f.poll(1))
            ack = support.acks(redis.client, "accept")[0]
            self.assertEqual(ack["status"], "rejected")
            self.assertIn("multiple of 3, not 4", ack["detail"])
            self.assertEqual(f.allocation, [4])
            f.close()
        finally:
            redis.stop()

    def test_the_multiple_the_schedule_needs_reaches_the_master(self):
        from greyhound_megatron import PlanFollower
        redis = support.RedisServer()
        try:
            with self.assertRaises(ValueError):  # the count it starts from is not a multiple
                PlanFollower("mult", 1, 0, [3], redis_url=redis.url, rank=0, world_size=1, background=False, microbatch_multiple=2)
            with self.assertRaises(ValueError):
                PlanFollower("mult", 1, 0, [4], redis_url=redis.url, rank=0, world_size=1, background=False, microbatch_multiple=-1)
            f = PlanFollower("mult", 1, 0, [4], redis_url=redis.url, rank=0, world_size=1, background=False, microbatch_multiple=2)
            self.assertEqual(json.loads(redis.client.get("gh:v1:{mult}:layout"))["microbatch_multiple"], 2)
            f.close()
            f = PlanFollower("mult", 1, 0, [4], redis_url=redis.url, rank=0, world_size=1, background=False)
            self.assertEqual(json.loads(redis.client.get("gh:v1:{mult}:layout"))["microbatch_multiple"], 0)
            f.close()
        finally:
            redis.stop()


class Restart(unittest.TestCase):
    def s4_plan(self, client, job, epoch):
        plan = json.loads(support.plan_json(epoch, [], strategy="S4"))
        plan["exclude_ranks"] = [0]
        client.set("gh:v1:{%s}:plan" % job, json.dumps(plan))

    def test_an_s4_plan_is_requested_then_acknowledged(self):
        from greyhound_megatron import PlanFollower
        redis = support.RedisServer()
        try:
            f = PlanFollower("s4", 1, 0, [4], ("S2", "S4"), redis.url, rank=0, world_size=1, background=False)
            self.assertEqual(json.loads(redis.client.get("gh:v1:{s4}:layout"))["capabilities"], ["S2", "S4"])
            self.s4_plan(redis.client, "s4", 1)
            self.assertFalse(f.poll(5))
            self.assertEqual(f.restart_due, 1)
            self.assertFalse(f.poll(6), "nothing else is read while the restart is due")
            self.assertEqual(support.acks(redis.client, "s4"), {})
            self.assertTrue(f.request_restart(6))
            restart = json.loads(redis.client.get("gh:v1:{s4}:restart"))
            self.assertEqual((restart["epoch"], restart["exclude_ranks"]), (1, [0]))
            self.assertEqual(support.acks(redis.client, "s4"), {}, "acknowledged once the checkpoint is written")
            f.restart_checkpointed(apply_s=1.5)
            ack = support.acks(redis.client, "s4")[0]
            self.assertEqual((ack["status"], ack["iteration"], ack["apply_s"]), ("applied", 6, 1.5))
            self.assertEqual(f.restart_due, 0)
            f.close()
        finally:
            redis.stop()

    def test_a_failed_restart_request_keeps_the_job_training(self):
        from greyhound_megatron import PlanFollower
        redis = support.RedisServer()
        stopped = False
        try:
            f = PlanFollower("s4f", 1, 0, [4], ("S4",), redis.url, rank=0, world_size=1, background=False)
            self.s4_plan(redis.client, "s4f", 1)
            self.assertFalse(f.poll(0))
            self.assertEqual(f.restart_due, 1)
            redis.stop()
            stopped = True
            with self.assertLogs("greyhound_megatron", level=logging.WARNING) as logs:
                self.assertFalse(f.request_restart(1))
            self.assertEqual(f.restart_due, 0)
            self.assertIn("the restart request failed", f.last_rejection)
            self.assertIn("could not acknowledge plan 1", "\n".join(logs.output))
            self.assertFalse(f.poll(2))  # Redis away: training goes on
            f.close()
        finally:
            if not stopped:
                redis.stop()


class RestartS3(unittest.TestCase):
    """Rank 0's decisions for a DP 2 job, in one process (a gloo world of one: the broadcasts reach itself)."""

    def test_an_s3_plan_is_a_restart_with_its_placement_but_not_over_a_split(self):
        import torch.distributed as dist
        from greyhound_megatron import PlanFollower
        redis = support.RedisServer()
        d = tempfile.mkdtemp(prefix="gh-s3f-")
        dist.init_process_group("gloo", init_method="file://" + os.path.join(d, "init"), rank=0, world_size=1)
        try:
            f = PlanFollower("s3f", 2, 0, [4, 4], ("S2", "S3"), redis.url, rank=0, world_size=2, gpus_per_node=1,
                             background=False)
            layout = json.loads(redis.client.get("gh:v1:{s3f}:layout"))
            self.assertEqual((layout["capabilities"], layout["s3_by_restart"]), (["S2", "S3"], True))
            swap = [{"rank": 0, "tp": 0, "dp": 1, "pp": 0}, {"rank": 1, "tp": 0, "dp": 0, "pp": 0}]

            def s3(epoch):
                plan = json.loads(support.plan_json(epoch, [], strategy="S3"))
                plan["placement"] = swap
                redis.client.set("gh:v1:{s3f}:plan", json.dumps(plan))

            redis.client.set("gh:v1:{s3f}:plan", support.plan_json(1, [5, 3]))
            self.assertTrue(f.poll(0))
            s3(2)
            with self.assertLogs("greyhound_megatron", level=logging.WARNING):
                self.assertFalse(f.poll(1))
            self.assertEqual(f.restart_due, 0)
            self.assertIn("would drop the split [5, 3]", f.last_rejection)
            self.assertEqual(support.acks(redis.client, "s3f")[0]["status"], "rejected")
            redis.client.set("gh:v1:{s3f}:plan", support.plan_json(3, [4, 4], strategy="S1", action="revert"))
            self.assertTrue(f.poll(2))
            s3(4)
            self.assertFalse(f.poll(3))
            self.assertEqual((f.restart_due, f.restart_strategy), (4, "S3"))
            self.assertTrue(f.request_restart(4))
            restart = json.loads(redis.client.get("gh:v1:{s3f}:restart"))
            self.assertEqual((restart["epoch"], restart["placement"]), (4, swap))
            f.restart_checkpointed(apply_s=0.5)
            self.assertEqual(support.acks(redis.client, "s3f")[0]["status"], "applied")
            f.close()
            # Without S3 advertised the same plan is refused by the job client, not restarted for.
            g = PlanFollower("s3g", 2, 0, [4, 4], ("S2",), redis.url, rank=0, world_size=2, background=False)
            redis.client.set("gh:v1:{s3g}:plan", redis.client.get("gh:v1:{s3f}:plan"))
            with self.assertLogs("greyhound_megatron", level=logging.WARNING):
                self.assertFalse(g.poll(0))
            self.assertEqual((g.restart_due, support.acks(redis.client, "s3g")[0]["status"]), (0, "unsupported"))
            g.close()
        finally:
            dist.destroy_process_group()
            redis.stop()
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
