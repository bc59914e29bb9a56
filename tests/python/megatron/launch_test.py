"""greyhound_megatron.place_rank(): the rank a restarted job's process takes, from the job's restart request.

usage: /usr/bin/python3 launch_test.py
Against a private redis-server, with restart requests written through libgreyhound_job as the plugin writes
them: no request (or an S4 one) keeps every launch rank's own rank; an S3 request's placement gives each
launch rank the global rank of its new role (TP 2 x DP 2 x PP 2, the TP groups of two nodes traded); a
placement for another world size and an unreadable request are ignored alike by every rank (logged); a Redis
that cannot be reached is an error after the timeout, never a guess.
"""
import json
import logging
import unittest

import support
from greyhound_megatron import _capi, launch, place_rank

# TP 2 x DP 2 x PP 2 on four nodes of two GPUs: the TP groups on nodes 1 and 2 trade roles: (dp 1, pp 0) and
# (dp 0, pp 1).
TRADED = [(0, 0, 0, 0), (1, 1, 0, 0), (2, 0, 0, 1), (3, 1, 0, 1), (4, 0, 1, 0), (5, 1, 1, 0), (6, 0, 1, 1),
          (7, 1, 1, 1)]


def env(launch_rank, world=8):
    return {"RANK": str(launch_rank), "WORLD_SIZE": str(world)}


class RoleRank(unittest.TestCase):
    def test_the_rank_of_a_role_is_megatrons(self):
        self.assertEqual(launch.megatron_placement(2, 2, 2)[5], (5, 1, 0, 1))
        ranks = [launch.role_rank(TRADED, r, 8)[0] for r in range(8)]
        self.assertEqual(ranks, [0, 1, 4, 5, 2, 3, 6, 7])
        self.assertEqual([launch.role_rank(launch.megatron_placement(2, 2, 2), r, 8)[0] for r in range(8)],
                         list(range(8)))

    def test_what_is_not_a_placement_of_this_launch_says_why(self):
        self.assertIn("7 entries for 8 ranks", launch.role_rank(TRADED[:7], 0, 8)[1])
        twice = [(0, 0, 0, 0)] + TRADED[1:]
        twice[1] = (0, 1, 0, 0)
        self.assertIn("every launch rank once", launch.role_rank(twice, 0, 8)[1])
        same_role = list(TRADED)
        same_role[1] = (1, 0, 0, 0)
        self.assertIn("every (tp, dp, pp)", launch.role_rank(same_role, 0, 8)[1])


class PlaceRank(support.RedisCase):
    def request(self, job, placement=(), exclude_nodes=()):
        """The restart request as the plugin's rank 0 writes it (a layout first: the placement is checked)."""
        c = _capi.JobClient(job, self.redis.url)
        try:
            rc, err = c.publish_layout(2, 2, 2, [4, 4], [4, 4], _capi.CAP_S3_BY_RESTART | _capi.CAP_S4, 2)
            self.assertEqual(rc, _capi.OK, err)
            rc, err = c.request_restart(0, 3, "test", exclude_nodes, (), placement)
            self.assertEqual(rc, _capi.OK, err)
        finally:
            c.close()

    def test_no_request_keeps_the_launch_rank(self):
        e = env(5)
        took = place_rank("none", self.redis.url, environ=e)
        self.assertEqual((took.launch_rank, took.rank, took.placement), (5, 5, []))
        self.assertEqual(e, {"RANK": "5", "WORLD_SIZE": "8", "GREYHOUND_RANK": "5", "GREYHOUND_LAUNCH_RANK": "5"})
        self.assertIs(launch.placed(), took)

    def test_an_s3_request_places_every_launch_rank(self):
        self.request("s3", TRADED)
        ranks = []
        for r in range(8):
            e = env(r)
            took = place_rank("s3", self.redis.url, environ=e)
            self.assertEqual(took.placement, TRADED)
            self.assertEqual((e["GREYHOUND_RANK"], e["GREYHOUND_LAUNCH_RANK"]), (str(r), str(r)))
            self.assertEqual(e["RANK"], str(took.rank))
            ranks.append(took.rank)
            # Called again in the same process (an in-process restart): from the launch rank, the same answer.
            self.assertEqual(place_rank("s3", self.redis.url, environ=e).rank, took.rank)
        self.assertEqual(ranks, [0, 1, 4, 5, 2, 3, 6, 7])
        # A later S4 restart carries no placement: Megatron's again.
        self.request("s3", (), exclude_nodes=(1,))
        e = env(2)
        self.assertEqual(place_rank("s3", self.redis.url, environ=e).rank, 2)

    def test_a_placement_that_does_not_fit_is_ignored_by_every_rank(self):
        self.request("other", TRADED)
        e = env(2, world=4)  # restarted on fewer ranks than the placement names
        with self.assertLogs("greyhound_megatron", level=logging.WARNING) as logs:
            took = place_rank("other", self.redis.url, environ=e)
        self.assertEqual((took.rank, took.placement, e["RANK"]), (2, [], "2"))
        self.assertIn("8 entries for 4 ranks", "\n".join(logs.output))
        self.redis.client.set("gh:v1:{other}:restart", json.dumps({"rank": 0, "placement": [{"rank": -1}]}))
        e = env(4)
        with self.assertLogs("greyhound_megatron", level=logging.WARNING) as logs:
            self.assertEqual(place_rank("other", self.redis.url, environ=e).rank, 4)
        self.assertIn("placement[0]", "\n".join(logs.output))

    def test_bad_environments_say_why(self):
        for e, why in [({"WORLD_SIZE": "8"}, "RANK=''"), ({"RANK": "x", "WORLD_SIZE": "8"}, "RANK='x'"),
                       ({"RANK": "8", "WORLD_SIZE": "8"}, "not below WORLD_SIZE"),
                       ({"RANK": "1"}, "WORLD_SIZE=''")]:
            with self.assertRaisesRegex(ValueError, why):
                place_rank("bad", self.redis.url, environ=dict(e))


class WithoutRedis(unittest.TestCase):
    def test_an_unreachable_redis_is_an_error_not_a_guess(self):
        url = "redis://127.0.0.1:%d/0" % support.free_port()
        e = env(3)
        with self.assertRaisesRegex(RuntimeError, "every rank must start with the same placement"):
            place_rank("away", url, environ=e, timeout_s=0.5)
        self.assertEqual(e, env(3), "nothing set")


if __name__ == "__main__":
    unittest.main(verbosity=2)
