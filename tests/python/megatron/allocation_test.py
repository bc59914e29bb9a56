"""greyhound_megatron's pure parts (the allocation's shares, the schedule, the sampler's indices) and
PlanFollower's argument checks and its behaviour without Redis, on one process.

usage: /usr/bin/python3 allocation_test.py (python/ on sys.path from the repository layout; libgreyhound_job
from GREYHOUND_JOB_LIB or the build directory)
"""
import logging
import socket
import time
import unittest

import support  # also puts python/ on sys.path

from greyhound_megatron import (Allocation, AllocationError, AllocationSchedule, PlanFollower,  # noqa: E402
                                ReplicaBatchSampler)


def megatron_order(total, consumed, mbs, dp, d):
    """What MegatronPretrainingSampler hands replica d (its documented behaviour: every mbs * dp consecutive
    samples form a micro-step, replica d takes the d-th run of mbs)."""
    out, batch = [], []
    for idx in range(consumed, total):
        batch.append(idx)
        if len(batch) == mbs * dp:
            out.append(batch[d * mbs:(d + 1) * mbs])
            batch = []
    return out


class AllocationShares(unittest.TestCase):
    def test_offsets_and_loss_scales(self):
        a = Allocation([3, 1, 2, 2])
        self.assertEqual(a.total, 8)
        self.assertEqual([a.offset(d) for d in range(4)], [0, 3, 4, 6])
        self.assertEqual([a.loss_scale(d) for d in range(4)], [1.5, 0.5, 1.0, 1.0])
        self.assertEqual(sum(a.loss_scale(d) / a.num_microbatches(d) * a.num_microbatches(d) for d in range(4)), 4)
        self.assertFalse(a.is_uniform)
        self.assertEqual(Allocation.uniform(4, 2).loss_scale(3), 1.0)

    def test_slots_cover_the_global_batch_once(self):
        for counts in ([2, 2, 2, 2], [3, 1, 2, 2], [5, 1, 1, 1], [1, 7]):
            a = Allocation(counts)
            slots = sorted(s for d in range(a.dp_size) for s in a.slots(d))
            self.assertEqual(slots, list(range(a.total)), counts)
        self.assertEqual(Allocation([2, 2]).slots(1), [1, 3])  # Megatron's interleaving while uniform
        self.assertEqual(Allocation([3, 1]).slots(1), [3])      # the prefix sum otherwise

    def test_bad_allocations_say_why(self):
        with self.assertRaisesRegex(AllocationError, "replica 1: 0 micro-batches"):
            Allocation([2, 0])
        with self.assertRaisesRegex(AllocationError, "not an integer"):
            Allocation([2, 1.5])
        with self.assertRaisesRegex(AllocationError, "no DP replica"):
            Allocation([])
        with self.assertRaisesRegex(AllocationError, "3 entries for 4 DP replicas"):
            Allocation([3, 3, 2]).check_replaces(Allocation([2, 2, 2, 2]))
        with self.assertRaisesRegex(AllocationError, "9 micro-batches in the global batch, the job trains with 8"):
            Allocation([3, 2, 2, 2]).check_replaces(Allocation([2, 2, 2, 2]))


class Schedule(unittest.TestCase):
    def test_a_new_allocation_starts_after_what_was_read(self):
        s = AllocationSchedule(Allocation([2, 2]))
        self.assertEqual(s.first_free(5), 5)
        s.note_generated(6)
        self.assertEqual(s.first_free(5), 7)
        with self.assertRaisesRegex(AllocationError, "already being read"):
            s.add(6, Allocation([3, 1]))
        s.add(7, Allocation([3, 1]))
        self.assertEqual(s.at(6).counts, (2, 2))
        self.assertEqual(s.at(7).counts, (3, 1))
        self.assertEqual(s.at(1000).counts, (3, 1))
        s.note_generated(9)
        s.add(12, Allocation([2, 2]))
        self.assertEqual([s.at(i).counts for i in (9, 11, 12)], [(3, 1), (3, 1), (2, 2)])
        with self.assertRaisesRegex(AllocationError, "in the global batch"):
            s.add(20, Allocation([3, 2]))


class Sampler(unittest.TestCase):
    def test_uniform_is_megatrons_order(self):
        for consumed in (0, 24):
            for d in range(3):
                s = ReplicaBatchSampler(100, consumed, 2, d, 3, AllocationSchedule(Allocation.uniform(3, 4)))
                self.assertEqual(list(s), megatron_order(100, consumed, 2, 3, d), (consumed, d))

    def test_uneven_replicas_read_the_same_global_batches(self):
        schedule = AllocationSchedule(Allocation([2, 2, 2, 2]))
        schedule.add(1, Allocation([3, 1, 2, 2]))
        samplers = [ReplicaBatchSampler(64, 0, 2, d, 4, schedule) for d in range(4)]
        got = [list(s) for s in samplers]
        self.assertEqual([len(g) for g in got], [2 + 3 + 3 + 3, 2 + 1 + 1 + 1, 8, 8])
        # Global batch 1 (samples 16..31): replica 0 has slots 0..2, replica 1 slot 3, and so on.
        self.assertEqual(got[0][2:5], [[16, 17], [18, 19], [20, 21]])
        self.assertEqual(got[1][2], [22, 23])
        for k in range(4):  # every global batch is read whole, once
            mine = sorted(i for g, sam in zip(got, samplers) for b in g for i in b if k * 16 <= i < (k + 1) * 16)
            self.assertEqual(mine, list(range(k * 16, (k + 1) * 16)), k)
        self.assertEqual(schedule.frontier, 3)

    def test_bad_arguments(self):
        sched = AllocationSchedule(Allocation([2, 2]))
        with self.assertRaisesRegex(ValueError, "not within"):
            ReplicaBatchSampler(10, 0, 1, 2, 2, sched)
        with self.assertRaisesRegex(ValueError, "whole number of global batches"):
            ReplicaBatchSampler(10, 3, 1, 0, 2, sched)
        with self.assertRaisesRegex(ValueError, "2 replicas, the sampler 3"):
            ReplicaBatchSampler(10, 0, 1, 0, 3, sched)


def closed_url():
    return "redis://127.0.0.1:%d/0" % support.free_port()  # nothing listens there


class FollowerWithoutRedis(unittest.TestCase):
    def test_bad_arguments_say_why(self):
        url = closed_url()
        cases = [(dict(dp_size=2, dp_rank=2, microbatches=2), "dp_rank 2 is not within dp_size 2"),
                 (dict(dp_size=2, dp_rank=0, microbatches=2, world_size=3), "is not the world size 3"),
                 (dict(dp_size=2, dp_rank=0, microbatches=[2, 2, 2]), "3 entries for 2 DP replicas"),
                 (dict(dp_size=2, dp_rank=0, microbatches=[2, 0]), "replica 1: 0 micro-batches"),
                 (dict(dp_size=2, dp_rank=0, microbatches=2, capabilities=("S5",)), "'S5' is not supported"),
                 (dict(dp_size=2, dp_rank=0, microbatches=2, poll_every=0), "poll_every must be"),
                 (dict(dp_size=2, dp_rank=0, microbatches=2), "needs torch.distributed initialised"),
                 (dict(dp_size=1, dp_rank=0, microbatches=2, world_size=1, redis_url="http://x"),
                  "cannot open the job client")]
        for kwargs, why in cases:
            kwargs.setdefault("world_size", 2)
            with self.assertRaisesRegex(ValueError, why):
                PlanFollower("t", redis_url=kwargs.pop("redis_url", url), rank=0, **kwargs)

    def test_an_absent_redis_leaves_training_alone(self):
        with self.assertLogs("greyhound_megatron", level=logging.WARNING) as logs:
            f = PlanFollower("t", 1, 0, [3], redis_url=closed_url(), rank=0, world_size=1, background=False)
            for it in range(5):
                self.assertFalse(f.poll(it))
        self.assertEqual((f.allocation, f.num_microbatches(), f.microbatch_offset(), f.loss_scale()),
                         ([3], 3, 0, 1.0))
        text = "\n".join(logs.output)
        self.assertIn("layout not published yet", text)
        self.assertEqual(text.count("layout not published yet"), 1, "once per reason, not once per poll")
        f.close()

    def test_no_poll_waits_on_an_absent_or_hung_redis(self):
        # The follower's default client does its Redis I/O on its own thread: with nothing listening, and with a
        # server that accepts connections but never answers (the client's command timeout is 300 ms, its connect
        # timeout 200 ms), no poll takes either.
        hung = socket.socket()
        hung.bind(("127.0.0.1", 0))
        hung.listen(64)  # the kernel completes the handshakes; nothing reads or answers
        try:
            for url in (closed_url(), "redis://127.0.0.1:%d/0" % hung.getsockname()[1]):
                with self.assertLogs("greyhound_megatron", level=logging.WARNING) as logs:
                    f = PlanFollower("t", 1, 0, [3], redis_url=url, rank=0, world_size=1)
                    slowest = 0.0
                    for it in range(40):
                        t0 = time.monotonic()
                        self.assertFalse(f.poll(it))
                        slowest = max(slowest, time.monotonic() - t0)
                        time.sleep(0.02)
                self.assertLess(slowest, 0.15, url)
                text = "\n".join(logs.output)
                self.assertEqual(text.count("cannot read the plan"), 1, "reported once per reason: " + text)
                self.assertEqual(f.allocation, [3])
                f.close()
        finally:
            hung.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
