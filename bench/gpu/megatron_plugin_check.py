"""greyhound_megatron in a one-GPU torch job with NCCL, under libgreyhound.so (scripts/gpu-check, step 4).

usage: python3 megatron_plugin_check.py OUT_JSON [REDIS_URL]
One rank (NCCL backend, CUDA tensors) trains a small model for 40 iterations; PlanFollower polls at every
boundary (its broadcast goes over a gloo group the follower creates, so no device synchronisation) and marks
each iteration for greyhound's validation pause. With REDIS_URL an S2 plan [N] is written before iteration 10
and must be acknowledged. Writes what it saw to OUT_JSON; exit 1 on a failed check, 77 without CUDA torch.
"""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))


def main():
    out_path = sys.argv[1]
    url = sys.argv[2] if len(sys.argv) > 2 else None
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print("megatron plugin check: skipped, no torch (%s)" % e)
        return 77
    if not torch.cuda.is_available() or not dist.is_nccl_available():
        print("megatron plugin check: skipped, torch without CUDA or NCCL")
        return 77
    from greyhound_megatron import PlanFollower, _capi
    init = tempfile.mktemp(prefix="gh-plugin-init-")
    dist.init_process_group("nccl", init_method="file://" + init, rank=0, world_size=1)
    follower = PlanFollower(os.environ.get("GREYHOUND_JOB", "gpucheck-plugin"), 1, 0, 4, redis_url=url)
    model = torch.nn.Linear(1024, 1024).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    times, marks = [], []
    for it in range(40):
        if it == 10 and url:
            import redis
            r = redis.Redis.from_url(url)
            r.set("gh:v1:{%s}:plan" % follower.job, json.dumps({"epoch": 1, "strategy": "S2", "action": "apply",
                                                                "incident": 1, "reason": "gpu-check",
                                                                "microbatches": [4]}))
        t0 = time.perf_counter()
        follower.poll(it)
        marks.append(_capi.mark_iteration(it))
        opt.zero_grad()
        for _ in range(follower.num_microbatches()):
            loss = model(torch.randn(64, 1024, device="cuda")).square().mean() * follower.loss_scale()
            (loss / follower.num_microbatches()).backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    result = {"iterations": len(times), "median_iteration_ms": sorted(times)[len(times) // 2] * 1e3,
              "mark_status": sorted(set(marks)), "applied_epoch": follower.applied_epoch,
              "allocation": follower.allocation}
    if url:
        import redis
        acks = redis.Redis.from_url(url, decode_responses=True).hgetall("gh:v1:{%s}:plan:acks" % follower.job)
        result["acks"] = {k: json.loads(v) for k, v in acks.items()}
    follower.close()
    dist.destroy_process_group()
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result))
    ok = result["mark_status"] == [0] and (not url or result.get("acks", {}).get("0", {}).get("status") == "applied")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
