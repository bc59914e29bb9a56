"""greyhound_megatron.megatron.install() against a stand-in module tree with Megatron-LM's import paths, function
names, signatures and call order (tests/python/megatron/standin, written from the real source's facts; no
Megatron code).

usage: /usr/bin/python3 adapter_test.py
4 gloo ranks train 6 iterations through the stand-in's train() (Megatron's loop: update_num_microbatches,
train_step with its forward_backward_func, the scheduler stepped by get_num_microbatches() x micro batch x DP,
consumed samples), once with no plan and once with an S2 plan [3, 1, 2, 2] waiting in a private
redis-server, for pretrain_gpt's loss (summed over tokens, divided by them), the per-token loss and the legacy
pair. With two DataLoader workers reading ahead, the plan takes effect at the first global batch not yet
read; from then on the schedule runs the replica's count while everything else sees the global batch's: every
rank's scheduler steps and learning rate equal the uniform run's at every iteration, and so do the
parameters.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import support

import torch  # noqa: E402

WORLD = 4


def run_ranks(redis, job, d, caps="S2", options=None):
    extra = [json.dumps(options)] if options else []
    procs = [subprocess.Popen([sys.executable, os.path.join(support.HERE, "adapter_rank.py"), str(r), str(WORLD),
                               os.path.join(d, "init"), job, redis.url, d, "2", caps] + extra,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in range(WORLD)]
    outs = [p.communicate(timeout=120)[0].decode(errors="replace") for p in procs]
    return [p.returncode for p in procs], outs


def run_job(redis, job, plan=None, options=None):
    d = tempfile.mkdtemp(prefix="gh-adapter-")
    try:
        if plan is not None:
            redis.client.set("gh:v1:{%s}:plan" % job, support.plan_json(1, plan))
        codes, outs = run_ranks(redis, job, d, options=options)
        ranks = support.rank_results(d, codes, outs)
        return torch.load(os.path.join(d, "params.pt")), ranks, outs
    finally:
        shutil.rmtree(d, ignore_errors=True)


class Adapter(support.RedisCase):
    def check_uneven_equals_uniform(self, loss):
        plan = [3, 1, 2, 2]
        uniform, plain, _ = run_job(self.redis, "plain-" + loss, options={"loss": loss})
        for r in plain:
            self.assertEqual([s[1] for s in r["seen"]], [2] * 6)  # 16 samples / (2 per micro-batch x 4 replicas)
        uneven, ranks, outs = run_job(self.redis, "uneven-" + loss, plan, options={"loss": loss})
        diff = max(float((a - b).abs().max()) for a, b in zip(uneven, uniform))
        ran = [s[1] for s in ranks[0]["seen"]]
        switch = next((i for i, n in enumerate(ran) if n != 2), None)
        print("%s: plan in force from iteration %s; max |diff| vs uniform = %.3g" % (loss, switch, diff))
        self.assertIsNotNone(switch, outs[0])
        self.assertGreaterEqual(switch, 1, "two workers read ahead: the switch waits for an unread global batch")
        for rank, r in enumerate(ranks):
            self.assertEqual(r["refused"], {})
            self.assertEqual(r["valid_samplers_untouched"], [True])
            self.assertEqual(r["consumed"], 6 * 16)
            for (i, ran, after, steps, lr), base in zip(r["seen"], plain[rank]["seen"]):
                self.assertEqual(ran, 2 if i < switch else plan[rank], (rank, i))  # the schedule's count
                self.assertEqual(after, 2)  # everything else sees the uniform count
                # One learning-rate schedule: every replica's scheduler where the uniform run's is.
                self.assertEqual((steps, lr), (base[3], base[4]), (rank, i))
                self.assertEqual(steps, (i + 1) * 16)
        self.assertLess(diff, 1e-12)
        acks = support.acks(self.redis.client, "uneven-" + loss)
        self.assertEqual(sorted(acks), [0, 1, 2, 3])
        for a in acks.values():
            self.assertEqual((a["epoch"], a["status"], a["iteration"]), (1, "applied", switch))
        layout = json.loads(self.redis.client.get("gh:v1:{uneven-%s}:layout" % loss))
        self.assertEqual(layout["microbatches"], plan)

    def test_an_s2_plan_keeps_one_lr_schedule_and_the_uniform_step_with_pretrain_gpts_loss(self):
        self.check_uneven_equals_uniform("token_mean")

    def test_an_s2_plan_keeps_the_uniform_step_with_the_per_token_loss(self):
        self.check_uneven_equals_uniform("per_token")

    def test_an_s2_plan_keeps_the_uniform_step_with_the_legacy_loss_pair(self):
        self.check_uneven_equals_uniform("legacy")

    def test_a_step_batch_size_schedule_is_left_alone(self):
        # 8 samples (1 micro-batch a replica) until 32 are consumed, then 16 (2): S2 is not advertised, the plan
        # waiting is acknowledged as unsupported, and the step runs the count the loop counts at every iteration.
        _, ranks, outs = run_job(self.redis, "stepped", [3, 1, 2, 2],
                                 options={"step_batch_size_schedule": "0:8 32:16"})
        for r in ranks:
            self.assertIn("--step-batch-size-schedule", r["refused"]["S2"])
            self.assertEqual([(s[1], s[2]) for s in r["seen"]], [(1, 1)] * 4 + [(2, 2)] * 2)
            self.assertEqual([s[3] for s in r["seen"]], [8, 16, 24, 32, 48, 64])
        acks = support.acks(self.redis.client, "stepped")
        self.assertEqual(sorted(acks), [0, 1, 2, 3])
        for a in acks.values():
            self.assertEqual(a["status"], "unsupported", a)

    def test_an_s4_plan_checkpoints_and_stops_through_megatrons_flags(self):
        d = tempfile.mkdtemp(prefix="gh-adapter-s4-")
        try:
            plan = json.loads(support.plan_json(1, [], strategy="S4"))
            plan["exclude_nodes"] = [1]
            plan["reason"] = "node 1 is slow"
            self.redis.client.set("gh:v1:{s4job}:plan", json.dumps(plan))
            codes, outs = run_ranks(self.redis, "s4job", d, "S2,S4")
            self.assertEqual(codes, [3] * WORLD, outs[0])
            restart = json.loads(self.redis.client.get("gh:v1:{s4job}:restart"))
            self.assertEqual((restart["epoch"], restart["exclude_nodes"], restart["rank"]), (1, [1], 0))
            self.assertIn("node 1 is slow", restart["reason"])
            self.assertIsNone(self.redis.client.get("gh:v1:{s4job}:layout"), "withdrawn with the request")
            # Picked up before the first step, carried out at the next boundary (once the step's flags are known).
            for r in range(WORLD):
                with open(os.path.join(d, "checkpoint-rank%d.json" % r)) as f:
                    self.assertEqual(json.load(f), {"iteration": 1, "consumed_train_samples": 16, "num_steps": 16})
            acks = support.acks(self.redis.client, "s4job")
            self.assertEqual(sorted(acks), [0, 1, 2, 3])
            for a in acks.values():
                self.assertEqual((a["epoch"], a["status"], a["iteration"]), (1, "applied", 1))
                self.assertIn("stopping for the restart", a["detail"])
        finally:
            shutil.rmtree(d, ignore_errors=True)


    def test_with_async_save_an_s4_plan_is_acknowledged_once_its_checkpoint_is_durable(self):
        # --async-save: save_checkpoint_and_time only queues the write; Megatron's loop finishes it in
        # maybe_finalize_async_save(blocking=True) on its way out. The rank script looks at Redis at the moment
        # the write lands: that rank's acknowledgement may not be there yet.
        d = tempfile.mkdtemp(prefix="gh-adapter-s4async-")
        try:
            plan = json.loads(support.plan_json(1, [], strategy="S4"))
            plan["exclude_nodes"] = [1]
            self.redis.client.set("gh:v1:{s4async}:plan", json.dumps(plan))
            codes, outs = run_ranks(self.redis, "s4async", d, "S2,S4", {"async_save": True})
            self.assertEqual(codes, [3] * WORLD, outs[0])
            for r in range(WORLD):
                with open(os.path.join(d, "checkpoint-rank%d.json" % r)) as f:
                    self.assertEqual(json.load(f)["iteration"], 1)
                with open(os.path.join(d, "async-rank%d.json" % r)) as f:
                    self.assertNotIn(str(r), json.load(f)["acks_when_durable"], "acknowledged before it was durable")
            acks = support.acks(self.redis.client, "s4async")
            self.assertEqual(sorted(acks), [0, 1, 2, 3])
            for a in acks.values():
                self.assertEqual((a["epoch"], a["status"], a["iteration"]), (1, "applied", 1))
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_an_s3_plan_restarts_the_job_with_its_roles_placed_anew(self):
        # DP 4 on four one-GPU nodes: launch ranks 1 and 2 trade roles (DP replicas 1 and 2).
        swap = [(0, 0, 0, 0), (1, 0, 2, 0), (2, 0, 1, 0), (3, 0, 3, 0)]
        entries = [dict(zip(("rank", "tp", "dp", "pp"), e)) for e in swap]
        d = tempfile.mkdtemp(prefix="gh-adapter-s3-")
        try:
            plan = json.loads(support.plan_json(1, [], strategy="S3"))
            plan["placement"] = entries
            plan["reason"] = "link 1-2 is congested"
            self.redis.client.set("gh:v1:{s3job}:plan", json.dumps(plan))
            codes, outs = run_ranks(self.redis, "s3job", d, "S2,S3")
            self.assertEqual(codes, [3] * WORLD, outs[0])
            restart = json.loads(self.redis.client.get("gh:v1:{s3job}:restart"))
            self.assertEqual((restart["epoch"], restart["placement"], restart["exclude_nodes"]), (1, entries, []))
            self.assertIn("link 1-2 is congested", restart["reason"])
            self.assertIsNone(self.redis.client.get("gh:v1:{s3job}:layout"), "withdrawn with the request")
            for r in range(WORLD):
                with open(os.path.join(d, "checkpoint-rank%d.json" % r)) as f:
                    self.assertEqual(json.load(f)["iteration"], 1)
            acks = support.acks(self.redis.client, "s3job")
            self.assertEqual(sorted(acks), [0, 1, 2, 3])
            for a in acks.values():
                self.assertEqual((a["epoch"], a["status"], a["iteration"]), (1, "applied", 1))

            # Restarted by its launcher as before: each process takes the rank of the role it is to hold, the
            # plan (still the latest, acknowledged) is not taken again, and the layout names the placement as
            # the job's own.
            codes, outs = run_ranks(self.redis, "s3job", d, "S2,S3")
            self.assertEqual(codes, [0] * WORLD, outs[1])
            runs_as = []
            for launch_rank in range(WORLD):
                with open(os.path.join(d, "rank-%d.json" % launch_rank)) as f:
                    r = json.load(f)
                runs_as.append(r["rank"])
                self.assertEqual(r["refused"], {})
                self.assertEqual(len(r["seen"]), 6)
            self.assertEqual(runs_as, [0, 2, 1, 3])
            layout = json.loads(self.redis.client.get("gh:v1:{s3job}:layout"))
            self.assertEqual(layout["capabilities"], ["S2", "S3"])
            self.assertTrue(layout["s3_by_restart"])
            self.assertEqual(layout["placement"], entries)
            self.assertEqual(layout["initial_placement"], entries)
            self.assertEqual(support.acks(self.redis.client, "s3job")[0]["epoch"], 1)
        finally:
            shutil.rmtree(d, ignore_errors=True)


class Missing(unittest.TestCase):
    def run_standin(self, code):
        """`code` in a fresh interpreter with the stand-in Megatron tree importable."""
        return self.run_py(code, os.path.join(support.HERE, "standin"))

    def run_py(self, code, path):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([path, os.path.join(support.ROOT, "python")]))
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)

    def test_no_megatron_is_a_clear_error(self):
        empty = tempfile.mkdtemp(prefix="gh-nomegatron-")
        try:
            r = self.run_py("from greyhound_megatron.megatron import install; install()", empty)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("MegatronMissing: greyhound_megatron.megatron: cannot import "
                          "megatron.core.num_microbatches_calculator", r.stderr)
        finally:
            shutil.rmtree(empty)

    def test_a_missing_function_is_named(self):
        for module, name, caps, why in [
                ("megatron.training.training", "train_step", ("S2",), "megatron.training.training has no train_step"),
                ("megatron.training.training", "save_checkpoint_and_time", ("S2", "S4"),
                 "has no save_checkpoint_and_time: S4 needs it")]:
            r = self.run_standin("import %s as m; del m.%s\n"
                                 "from greyhound_megatron.megatron import install; install(capabilities=%r)" %
                                 (module, name, caps))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(why, r.stderr)

    def test_the_interleaved_schedules_constraint_is_checked(self):
        r = self.run_standin("import argparse, megatron.training as mt, megatron.core.parallel_state as ps\n"
                             "mt.set_args(argparse.Namespace(virtual_pipeline_model_parallel_size=2))\n"
                             "ps.get_pipeline_model_parallel_world_size = lambda: 2\n"
                             "from greyhound_megatron.megatron import install\n"
                             "a = install()\n"
                             "print(a._accept([4, 2]) == '', a._accept([3, 3]))\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "True the interleaved pipeline schedule needs each replica's micro-batches "
                                           "to be a multiple of the pipeline size 2, not [3, 3]")

    def test_the_master_is_told_the_multiple_the_schedule_needs(self):
        # Interleaved on PP 2: multiples of 2; without interleaving (or PP 1): any count, 1.
        r = self.run_standin("import argparse, megatron.training as mt, megatron.core.parallel_state as ps\n"
                             "from greyhound_megatron.megatron import install\n"
                             "a = install()\n"
                             "mt.set_args(argparse.Namespace(virtual_pipeline_model_parallel_size=2))\n"
                             "print(a._microbatch_multiple(2), a._microbatch_multiple(1))\n"
                             "mt.set_args(argparse.Namespace(virtual_pipeline_model_parallel_size=None))\n"
                             "print(a._microbatch_multiple(2))\n"
                             "mt.set_args(argparse.Namespace(virtual_pipeline_model_parallel_size=2))\n"
                             "print(a._declared_multiple(2, [4, 4]))\n"
                             "print(a._declared_multiple(2, [3, 3]))\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().splitlines()
        self.assertEqual(lines[0].split() + lines[1].split(), ["2", "1", "1"])
        self.assertEqual(lines[2], "(2, '')")
        # Counts the interleaved constraint does not divide: nothing declared and S2 not offered, no error.
        self.assertIn("(0, 'the interleaved pipeline schedule runs [3, 3] micro-batches per replica", lines[3])

    def test_configurations_an_uneven_split_would_break_are_not_advertised(self):
        # The argument names Megatron-LM main and core_r0.17 use (docs/megatron.md's support matrix).
        r = self.run_standin("import argparse, enum\n"
                             "import megatron.core.num_microbatches_calculator as calc\n"
                             "import megatron.core.parallel_state as ps\n"
                             "calc.init_num_microbatches_calculator(rank=0, global_batch_size=16, micro_batch_size=2,\n"
                             "                                      data_parallel_size=1)\n"
                             "constant = calc._GLOBAL_NUM_MICROBATCHES_CALCULATOR\n"
                             "from greyhound_megatron.megatron import install\n"
                             "a = install()\n"
                             "def check(pp=1, **kw):\n"
                             "    ps.get_pipeline_model_parallel_world_size = lambda: pp\n"
                             "    a.refused.clear(); a._check_s2_config(argparse.Namespace(**kw))\n"
                             "    print(a.refused.get('S2', 'advertised'))\n"
                             "check()\n"
                             "check(rampup_batch_size=[8, 8, 100])\n"  # main: deprecated, ignored (constant count)
                             "check(step_batch_size_schedule='0:8 32:16')\n"
                             "class RampupBatchsizeNumMicroBatchesCalculator:\n"  # core_r0.17 honours the ramp
                             "    def get(self): return 4\n"
                             "calc._GLOBAL_NUM_MICROBATCHES_CALCULATOR = RampupBatchsizeNumMicroBatchesCalculator()\n"
                             "check(rampup_batch_size=[8, 8, 100])\n"
                             "check()\n"
                             "calc._GLOBAL_NUM_MICROBATCHES_CALCULATOR = constant\n"
                             "check(cuda_graph_impl='full_iteration')\n"
                             "CudaGraphScope = enum.Enum('CudaGraphScope', 'full_iteration attn full_iteration_inference')\n"
                             "check(cuda_graph_impl='local', cuda_graph_scope=[CudaGraphScope.full_iteration])\n"
                             "check(cuda_graph_impl='local', cuda_graph_scope=[CudaGraphScope.attn])\n"
                             "check(cuda_graph_impl='transformer_engine', pp=2)\n"
                             "check(cuda_graph_impl='transformer_engine', overlap_moe_expert_parallel_comm=True)\n"
                             "check(cuda_graph_impl='transformer_engine')\n"
                             "check(cuda_graph_impl='none', cuda_graph_scope=[CudaGraphScope.full_iteration])\n"
                             "check(iterations_to_skip=[3, 4])\n"
                             "check(iterations_to_skip=[])\n"
                             "check(num_experts=8)\n"
                             "check(mtp_num_layers=1)\n"
                             "check(dataloader_type='cyclic')\n"
                             "class FullCudaGraphWrapper:\n"
                             "    pass\n"
                             "a.refused.clear(); a._check_schedule(FullCudaGraphWrapper()); print(a.refused['S2'])\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().splitlines()
        expected = ["advertised", "advertised", "--step-batch-size-schedule", "--rampup-batch-size",
                    "calculator is RampupBatchsizeNumMicroBatchesCalculator", "full-iteration CUDA graphs",
                    "full-iteration CUDA graphs", "local CUDA graphs", "transformer-engine CUDA graphs",
                    "transformer-engine CUDA graphs", "advertised", "advertised", "--iterations-to-skip",
                    "advertised", "all-to-alls", "multi-token", "cyclic", "full-iteration CUDA graphs"]
        self.assertEqual(len(lines), len(expected), r.stdout)
        for line, why in zip(lines, expected):
            self.assertIn(why, line)
            if why == "advertised":
                self.assertEqual(line, why)

    def test_a_train_step_without_its_schedule_gets_no_split(self):
        # Megatron-LM before core_r0.14: train_step takes no forward_backward_func (it builds its own).
        r = self.run_standin("import argparse\n"
                             "import megatron.core.num_microbatches_calculator as calc\n"
                             "from megatron.training import training\n"
                             "def train_step(forward_step_func, data_iterator, model, optimizer, opt_param_scheduler,\n"
                             "               config):\n"
                             "    pass\n"
                             "training.train_step = train_step\n"
                             "calc.init_num_microbatches_calculator(rank=0, global_batch_size=16, micro_batch_size=2,\n"
                             "                                      data_parallel_size=1)\n"
                             "from greyhound_megatron.megatron import install\n"
                             "a = install()\n"
                             "a._check_s2_config(argparse.Namespace()); print(a.refused['S2'])\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("train_step takes no forward_backward_func", r.stdout)

    def test_async_save_without_a_way_to_tell_durability_gets_no_restart(self):
        r = self.run_standin("import argparse\n"
                             "from megatron.training import training\n"
                             "from greyhound_megatron.megatron import install\n"
                             "a = install(capabilities=('S2', 'S4'))\n"
                             "a._check_restart_config(argparse.Namespace(save='/ckpt', async_save=True))\n"
                             "print(a.refused.get('S4', 'advertised'))\n"
                             "a._orig_finalize = None\n"
                             "a._check_restart_config(argparse.Namespace(save='/ckpt', async_save=True))\n"
                             "print(a.refused.get('S4', 'advertised'))\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().splitlines()
        self.assertEqual(lines[0], "advertised")
        self.assertIn("--async-save, and this Megatron-LM's training module has no maybe_finalize_async_save",
                      lines[1])

    def test_capabilities_it_cannot_apply_are_refused(self):
        r = self.run_standin("from greyhound_megatron.megatron import install; install(capabilities=('S2', 'S5'))")
        self.assertIn("capability 'S5' is not one of S2, S3, S4", r.stderr)

    def test_s3_is_advertised_only_where_a_restart_can_take_the_placement(self):
        r = self.run_standin("import argparse, os\n"
                             "from greyhound_megatron import launch\n"
                             "from greyhound_megatron.megatron import install\n"
                             "a = install(capabilities=('S2', 'S3'), gpus_per_node=2)\n"
                             "def check(**kw):\n"
                             "    a.refused.clear(); a._check_s3_config(argparse.Namespace(**kw))\n"
                             "    print(a.refused.get('S3', 'advertised'))\n"
                             "check()\n"
                             "launch._PLACED = launch.Placed(0, 0, [])\n"
                             "check()\n"
                             "check(context_parallel_size=2)\n"
                             "check(expert_model_parallel_size=2)\n"
                             "swap0 = [(0, 0, 1, 0), (1, 0, 0, 0), (2, 0, 2, 0), (3, 0, 3, 0)]\n"
                             "swap12 = [(0, 0, 0, 0), (1, 0, 2, 0), (2, 0, 1, 0), (3, 0, 3, 0)]\n"
                             "print(repr(a._accept_placement(swap12)))\n"
                             "print(a._accept_placement(swap0))\n"
                             "os.environ['TORCHELASTIC_USE_AGENT_STORE'] = 'True'\n"
                             "print(repr(a._accept_placement(swap0)))\n"
                             "import sys, tempfile, importlib\n"
                             "d = tempfile.mkdtemp()\n"
                             "open(d + '/old_init.py', 'w').write('def _initialize_distributed():\\n'\n"
                             "    '    device = args.rank % device_count\\n')\n"
                             "sys.path.insert(0, d)\n"
                             "sys.modules['megatron.training.initialize'] = importlib.import_module('old_init')\n"
                             "check()\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().splitlines()
        self.assertEqual(len(lines), 8, r.stdout)
        self.assertIn("sets each process's GPU from its rank", lines[7])
        self.assertIn("place_rank() did not run", lines[0])
        self.assertEqual(lines[1], "advertised")
        self.assertIn("context parallelism", lines[2])
        self.assertIn("rank order", lines[3])
        self.assertEqual(lines[4], "''")
        self.assertIn("moves global rank 0 to launch rank 1", lines[5])
        self.assertEqual(lines[6], "''", "torchrun's agent hosts the store")



if __name__ == "__main__":
    unittest.main(verbosity=2)
