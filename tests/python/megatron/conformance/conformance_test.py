"""The Megatron plugin against Megatron-LM's own code (a checkout at SRC; the project carries none of it).

usage: /usr/bin/python3 conformance_test.py SRC   (scripts/megatron-conformance SRC; ctest's
megatron_conformance when GREYHOUND_MEGATRON_LM_SRC names a checkout)

DP 2 on gloo, Megatron's calculators, samplers, OptimizerParamScheduler, train_step and schedule
(conformance_rank.py says what is Megatron's and what the harness stubs; the list is printed). An S2 plan [3, 1]
from iteration 2 (the test plays the master: rank 0 writes it to a private redis-server before that step),
with pretrain_gpt's loss and with the per-token loss: at every iteration every rank's scheduler steps and
learning rate equal the uniform run's, the schedule runs the replica's count from iteration 2 while Megatron's
count stays the uniform one, and after the 8 steps the parameters equal the uniform run's. Then what must
refuse S2, with the checkout's real calculators and argument names.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import support  # noqa: E402

import torch  # noqa: E402

SRC = None
WORLD = 2
ITERS = 8


def run_job(redis, job, options, keep=None):
    """Runs the job's ranks in a temporary folder (in `keep`, left for the caller, where given)."""
    d = keep or tempfile.mkdtemp(prefix="gh-conformance-")
    try:
        procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "conformance_rank.py"), SRC, str(r), str(WORLD),
                                   os.path.join(d, "init"), job, redis.url, d, json.dumps(options)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in range(WORLD)]
        outs = [p.communicate(timeout=300)[0].decode(errors="replace") for p in procs]
        ranks = support.rank_results(d, [p.returncode for p in procs], outs)
        with open(os.path.join(d, "stubbed.json")) as f:
            stubbed = json.load(f)
        return torch.load(os.path.join(d, "params.pt")), ranks, stubbed, outs
    finally:
        if keep is None:
            shutil.rmtree(d, ignore_errors=True)


class Conformance(support.RedisCase):
    def check_plan(self, loss):
        plan, at = [3, 1], 2
        uniform, base, stubbed, _ = run_job(self.redis, "uniform-" + loss, {"loss": loss})
        uneven, ranks, _, outs = run_job(self.redis, "uneven-" + loss, {"loss": loss, "plan": plan, "plan_at": at})
        if loss == "token_mean":
            print("Megatron-LM checkout: %s" % stubbed["checkout"])
            print("stubbed by the harness (the rest is the checkout's code):")
            for what, why in stubbed["stubbed"]:
                print("  - %s: %s" % (what, why))
        diff = max(float((a - b).abs().max()) for a, b in zip(uneven, uniform))
        moved = max(float((a - b).abs().max()) for a, b in zip(uneven, [p * 0 for p in uniform]))
        print("%s: plan %s from iteration %d; max |params - uniform run's| = %.3g (params up to %.3g)" %
              (loss, plan, at, diff, moved))
        for rank, r in enumerate(ranks):
            self.assertEqual(r["refused"], {}, outs[rank])
            self.assertEqual(r["sampler"], "ReplicaBatchSampler")
            self.assertEqual(r["valid_samplers"], ["MegatronPretrainingSampler"])
            self.assertEqual(len(r["seen"]), ITERS)
            for s, b in zip(r["seen"], base[rank]["seen"]):
                i = s["iteration"]
                self.assertEqual(s["ran"], plan[rank] if i >= at else 2, (rank, i))  # the schedule's count
                self.assertEqual(s["count"], 2, (rank, i))  # Megatron's, everywhere else
                # One learning-rate schedule: every rank's scheduler where the uniform run's is, at every step.
                self.assertEqual((s["num_steps"], s["lr"]), (b["num_steps"], b["lr"]), (rank, i))
                self.assertEqual(s["num_steps"], (i + 1) * 8)
                self.assertAlmostEqual(s["loss"], b["loss"], delta=1e-12 * max(1.0, abs(b["loss"])))
        self.assertEqual([s["lr"] for s in ranks[0]["seen"]], [s["lr"] for s in ranks[1]["seen"]])
        self.assertLess(diff, 1e-12)
        acks = support.acks(self.redis.client, "uneven-" + loss)
        self.assertEqual(sorted(acks), list(range(WORLD)))
        for a in acks.values():
            self.assertEqual((a["epoch"], a["status"], a["iteration"]), (1, "applied", at))

    def test_an_uneven_plan_keeps_one_lr_schedule_and_the_uniform_step(self):
        self.check_plan("token_mean")

    def test_with_the_per_token_loss_too(self):
        self.check_plan("per_token")

    def test_a_step_batch_size_schedule_is_refused(self):
        with open(os.path.join(SRC, "megatron", "core", "num_microbatches_calculator.py")) as f:
            text = f.read()
        if "StepBatchsizeNumMicroBatchesCalculator" in text:
            options = {"args": {"step_batch_size_schedule": "0:8 32:16"}}
            why = "--step-batch-size-schedule"
        else:  # core_r0.17 and before: the ramp-up, which they still honour
            options = {"args": {"rampup_batch_size": [4, 4, 8]}}
            why = "--rampup-batch-size"
        _, ranks, _, outs = run_job(self.redis, "stepped", dict(options, plan=[3, 1], plan_at=2))
        for r in ranks:
            self.assertIn(why, r["refused"].get("S2", ""), outs[0])
            self.assertEqual(r["sampler"], "MegatronPretrainingSampler")
            self.assertEqual([s["ran"] for s in r["seen"]], [s["count"] for s in r["seen"]])
            self.assertGreater(r["seen"][-1]["count"], r["seen"][0]["count"], "the batch steps up")
        for a in support.acks(self.redis.client, "stepped").values():
            self.assertEqual(a["status"], "unsupported", a)

    def test_cuda_graphs_and_skipped_iterations_are_refused_with_this_checkouts_arguments(self):
        d = tempfile.mkdtemp(prefix="gh-conformance-refusals-")
        try:
            _, _, _, outs = run_job(self.redis, "refusals", {"refusals": True}, keep=d)
            with open(os.path.join(d, "refusals-0.json")) as f:
                said = json.load(f)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        print("refusals with this checkout's arguments: %s" % json.dumps(said, indent=1))
        self.assertIn("full-iteration CUDA graphs replay the captured micro-batch count", said["full-iteration graphs"])
        self.assertIn("transformer-engine CUDA graphs with pipeline parallelism", said["transformer-engine graphs, PP 2"])
        self.assertEqual(said["transformer-engine graphs, PP 1"], "advertised")
        self.assertIn("--iterations-to-skip", said["iterations to skip"])
        if "local graphs of attention" in said:
            self.assertIn("local CUDA graphs", said["local graphs of attention"])

    def test_the_arguments_the_refusals_read_are_megatrons(self):
        # Every argument name the plugin's S2 checks read that this checkout uses is read by Megatron-LM itself as
        # args.<name> (a name the checkout does not know, e.g. step_batch_size_schedule on core_r0.17, is
        # absent there, and the plugin's getattr default applies).
        from greyhound_megatron.megatron import S2_ARGUMENTS
        used = set()
        for root, _, files in os.walk(os.path.join(SRC, "megatron", "training")):
            for name in files:
                if name.endswith(".py"):
                    with open(os.path.join(root, name), errors="replace") as f:
                        used.update(re.findall(r"\bargs\.([A-Za-z_][A-Za-z0-9_]*)", f.read()))
        known = {meaning: [n for n in names if n in used] for meaning, names in S2_ARGUMENTS.items()}
        print("argument names this checkout reads, by setting: %s" % json.dumps(known))
        for meaning in ("CUDA graphs", "iteration skipping", "data loader", "MoE", "multi-token prediction"):
            self.assertTrue(known[meaning], "no argument for %s in this checkout" % meaning)
        # A batch size that moves: main's step schedule (the ramp-up is deprecated and ignored there), or
        # core_r0.17's ramp-up.
        self.assertTrue(known["step batch-size schedule"] or known["batch-size ramp-up"])
        self.assertIn("cuda_graph_impl", known["CUDA graphs"])
        # Full-iteration graphs: main names the implementation, core_r0.17 a scope of the local one.
        with open(os.path.join(SRC, "megatron", "training", "training.py")) as f:
            training = f.read()
        self.assertTrue('args.cuda_graph_impl == "full_iteration"' in training or
                        "CudaGraphScope.full_iteration in args.cuda_graph_scope" in training)
        self.assertIn("(iteration + 1) in args.iterations_to_skip", training)
        self.assertIn("maybe_finalize_async_save(blocking=True", training)


if __name__ == "__main__":
    if len(sys.argv) < 2 or not os.path.isdir(sys.argv[1]):
        print("usage: conformance_test.py MEGATRON_LM_CHECKOUT", file=sys.stderr)
        sys.exit(2)
    SRC = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
