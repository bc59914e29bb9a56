"""One rank of a gloo job that follows greyhound's plans with PlanFollower (driven by the tests).

usage: rank_loop.py RANK WORLD INIT_FILE JOB REDIS_URL OUT_DIR [DP]
(TP 1, PP = WORLD / DP; DP defaults to WORLD; Megatron's order: dp_rank = RANK % DP)
Polls at every iteration boundary (every 20 ms) until OUT_DIR/stop exists, then writes OUT_DIR/rank-RANK.json:
the allocation in force at each iteration and the iterations where a new one took effect.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from greyhound_megatron import PlanFollower  # noqa: E402


def main():
    rank, world, init_file, job, url, out = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4],
                                             sys.argv[5], sys.argv[6])
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=world)
    dp = int(sys.argv[7]) if len(sys.argv) > 7 else world
    accept = None
    refuse = os.environ.get("GH_TEST_REFUSE", "")  # "R:N": rank R turns down allocations whose first entry is N
    if refuse and int(refuse.split(":")[0]) == rank:
        first = int(refuse.split(":")[1])
        accept = lambda counts: "rank %d refuses %s" % (rank, counts) if counts[0] == first else ""  # noqa: E731
    follower = PlanFollower(job, dp_size=dp, dp_rank=rank % dp, microbatches=2 if dp == world else 4,
                            redis_url=url, tp_size=1, pp_size=world // dp, accept=accept)
    history, switches = [], []
    it = 0
    while True:
        stop = os.path.exists(os.path.join(out, "stop"))
        t = torch.tensor([1 if stop else 0])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # every rank stops at the same iteration
        if int(t.item()):
            break
        if follower.poll(it):
            switches.append({"iteration": it, "allocation": follower.allocation,
                             "num_microbatches": follower.num_microbatches(),
                             "offset": follower.microbatch_offset(), "loss_scale": follower.loss_scale()})
        history.append(follower.allocation)
        it += 1
        time.sleep(0.02)
    with open(os.path.join(out, "rank-%d.json" % rank), "w") as f:
        json.dump({"history": history, "switches": switches, "rejection": follower.last_rejection}, f)
    follower.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
