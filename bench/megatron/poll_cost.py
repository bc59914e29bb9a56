"""What PlanFollower.poll() costs a training iteration: 4 gloo ranks on this machine, rank 0 reading the plan
from a private redis-server at every poll, against a bare gloo broadcast of the same tensor.

usage: /usr/bin/python3 bench/megatron/poll_cost.py [POLLS]   (default 2000; run after scripts/build)
Prints the median and 99th percentile per poll on rank 0 and on the slowest other rank.
"""
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "python", "megatron"))
import support  # noqa: E402  (the private redis-server and the package on sys.path)

WORLD = 4


def rank_main(rank, init, url, polls, out):
    import torch
    import torch.distributed as dist
    from greyhound_megatron import PlanFollower
    dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=WORLD)
    follower = PlanFollower("bench", WORLD, rank, 2, redis_url=url)
    t = torch.zeros(3 + WORLD, dtype=torch.int64)
    bare, poll = [], []
    for i in range(polls):
        t0 = time.perf_counter()
        dist.broadcast(t, src=0)
        bare.append(time.perf_counter() - t0)
    dist.barrier()
    for i in range(polls):
        t0 = time.perf_counter()
        follower.poll(i)
        poll.append(time.perf_counter() - t0)
    torch.save({"bare": bare, "poll": poll}, os.path.join(out, "r%d.pt" % rank))
    follower.close()
    dist.destroy_process_group()


def main():
    import torch
    import torch.multiprocessing as mp
    polls = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    redis = support.RedisServer()
    try:
        with tempfile.TemporaryDirectory() as d:
            mp.spawn(rank_main, args=(os.path.join(d, "init"), redis.url, polls, d), nprocs=WORLD, join=True)
            res = [torch.load(os.path.join(d, "r%d.pt" % r)) for r in range(WORLD)]
    finally:
        redis.stop()

    def fmt(xs):
        xs = sorted(xs)
        return "median %6.1f us, p99 %7.1f us" % (statistics.median(xs) * 1e6, xs[int(len(xs) * 0.99)] * 1e6)
    print("%d polls, %d gloo ranks on %d CPUs" % (polls, WORLD, os.cpu_count()))
    print("bare gloo broadcast  rank 0: %s" % fmt(res[0]["bare"]))
    print("PlanFollower.poll()  rank 0: %s  (Redis GET + broadcast)" % fmt(res[0]["poll"]))
    worst = max(range(1, WORLD), key=lambda r: statistics.median(res[r]["poll"]))
    print("PlanFollower.poll()  rank %d: %s" % (worst, fmt(res[worst]["poll"])))


if __name__ == "__main__":
    main()
