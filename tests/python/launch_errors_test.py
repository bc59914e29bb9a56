"""Launch-time errors say what is wrong and never hold up the job.

usage: /usr/bin/python3 launch_errors_test.py BIN_DIR

- greyhound-run and greyhound-agent refuse an empty --shm-dir (it would put the rings and the lock at /).
- An agent that cannot start (here: a flag it does not know) is reported by greyhound-run, whose command
  still runs with its own exit status; with --print-env nothing is exported and the status is 1 (the Slurm
  TaskProlog then runs the task without greyhound). An agent that starts is not reported.
- greyhound-master refuses an --event-log it cannot open instead of running without it, and
  --validate-topologies other than ring, tree or both.
- greyhound-simcluster refuses faults on ranks or nodes the cluster does not have, and a chaos target on a
  node it does not have (given inline, the documented form, or as a number too large for an int).
- In a shared --shm-dir, an agent lock planted as a symlink or left writable by others is refused loudly (the
  agent exits 1; greyhound-run says so and still runs the command), and the file a link points at is never
  written; greyhound-simcluster refuses a --work-dir others can write to.
- A Redis password given on a command line is hidden from /proc/PID/cmdline once the daemon has started, and
  each daemon says to use GREYHOUND_REDIS_PASSWORD_FILE.
- A job name Redis keys cannot carry is refused by greyhoundctl, the agent and the master, and said by
  greyhound-run (which names the job the sanitised way); a --placement file is read with the bounded reader.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

BIN = None
UNREACHABLE = "redis://127.0.0.1:1"  # the agent retries Redis forever: it starts all the same


def run(argv, **kw):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30, text=True, **kw)


def lock_pid(shm, job):
    try:
        with open(os.path.join(shm, "greyhound.%s.agent.lock" % job)) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class LaunchErrors(unittest.TestCase):
    def setUp(self):
        self.shm = tempfile.mkdtemp(prefix="gh-py-launch-")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GREYHOUND_")}

    def tearDown(self):
        for name in os.listdir(self.shm):
            if name.endswith(".agent.lock"):
                pid = lock_pid(self.shm, name[len("greyhound."):-len(".agent.lock")])
                if pid > 0 and alive(pid):
                    os.kill(pid, 15)
        shutil.rmtree(self.shm, ignore_errors=True)

    def test_an_empty_shm_dir_is_refused(self):
        r = run([os.path.join(BIN, "greyhound-run"), "--shm-dir", "", "true"], env=self.env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--shm-dir must name a directory", r.stderr)
        r = run([os.path.join(BIN, "greyhound-agent"), "--shm-dir", ""], env=self.env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--shm-dir must name a directory", r.stderr)

    def test_an_agent_that_cannot_start_is_reported_and_the_command_still_runs(self):
        r = run([os.path.join(BIN, "greyhound-run"), "--job", "bad", "--shm-dir", self.shm, "--redis", UNREACHABLE,
                 "--agent-args", "--no-such-flag", "sh", "-c", "echo ran; exit 7"], env=self.env)
        self.assertEqual(r.returncode, 7, r.stderr)
        self.assertEqual(r.stdout, "ran\n")
        self.assertIn("greyhound-agent exited at once with status 2", r.stderr)
        self.assertIn("the command runs without the node's agent", r.stderr)

    def test_print_env_exports_nothing_when_the_agent_cannot_start(self):
        r = run([os.path.join(BIN, "greyhound-run"), "--job", "bad", "--shm-dir", self.shm, "--redis", UNREACHABLE,
                 "--agent-args", "--no-such-flag", "--print-env"], env=self.env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertIn("nothing exported", r.stderr)

    def test_an_agent_that_starts_is_not_reported(self):
        r = run([os.path.join(BIN, "greyhound-run"), "--job", "good", "--shm-dir", self.shm, "--redis", UNREACHABLE,
                 "sh", "-c", "exit 3"], env=self.env)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertNotIn("exited at once", r.stderr)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (lock_pid(self.shm, "good") and alive(lock_pid(self.shm, "good"))):
            time.sleep(0.05)
        self.assertTrue(alive(lock_pid(self.shm, "good")), "the agent runs and holds the job's lock")

    def test_the_master_refuses_an_event_log_it_cannot_open(self):
        path = os.path.join(self.shm, "no-such-dir", "events.jsonl")
        r = run([os.path.join(BIN, "greyhound-master"), "--job", "x", "--redis", UNREACHABLE, "--event-log", path],
                env=self.env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--event-log " + path + ": cannot open it for appending", r.stderr)

    def test_the_master_refuses_ha_flags_that_cannot_work(self):
        master = os.path.join(BIN, "greyhound-master")
        cases = [
            (["--master-id", "a"], "--master-id and --lease-ms need --ha"),
            (["--ha", "--master-id", "a\tb"], "--master-id: 1 to 128 bytes, no blanks or control bytes"),
            (["--ha", "--poll-ms", "2000"], "--poll-ms must be at most a third of --lease-ms"),
            (["--ha", "--lease-ms", "100"], "--lease-ms"),
            # The plan lease would lapse under a healthy master: renewed between steps, taken over by a standby.
            (["--poll-ms", "600", "--plan-lease-s", "2"], "--poll-ms must be at most a quarter of --plan-lease-s"),
            (["--ha", "--lease-ms", "2000", "--plan-lease-s", "3"], "--lease-ms must be at most half of --plan-lease-s"),
        ]
        for flags, needle in cases:
            r = run([master, "--job", "x", "--redis", UNREACHABLE] + flags, env=self.env)
            self.assertEqual(r.returncode, 2, (flags, r.stderr))
            self.assertIn(needle, r.stderr, flags)

    def test_the_master_refuses_validation_topologies_it_does_not_know(self):
        master = os.path.join(BIN, "greyhound-master")
        for value in ("ring,star", "", "ring,", "rings"):
            r = run([master, "--job", "x", "--redis", UNREACHABLE, "--validate-topologies", value], env=self.env)
            self.assertEqual(r.returncode, 2, (value, r.stderr))
            self.assertIn("--validate-topologies takes ring, tree or ring,tree", r.stderr, value)

    def plant_lock_link(self, job):
        victim = os.path.join(self.shm, "victim")
        with open(victim, "w") as f:
            f.write("precious")
        os.symlink(victim, os.path.join(self.shm, "greyhound.%s.agent.lock" % job))
        return victim

    def test_an_agent_lock_planted_as_a_link_is_refused_and_never_written(self):
        victim = self.plant_lock_link("planted")
        r = run([os.path.join(BIN, "greyhound-agent"), "--job", "planted", "--shm-dir", self.shm,
                 "--redis", UNREACHABLE], env=self.env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("greyhound.planted.agent.lock: is a symbolic link", r.stderr)
        r = run([os.path.join(BIN, "greyhound-run"), "--job", "planted", "--shm-dir", self.shm, "--redis", UNREACHABLE,
                 "sh", "-c", "echo ran; exit 5"], env=self.env)
        self.assertEqual(r.returncode, 5, r.stderr)
        self.assertEqual(r.stdout, "ran\n")
        self.assertIn("cannot use the agent lock", r.stderr)
        self.assertIn("is a symbolic link", r.stderr)
        self.assertIn("the command runs without the node's agent", r.stderr)
        r = run([os.path.join(BIN, "greyhound-run"), "--job", "planted", "--shm-dir", self.shm, "--redis", UNREACHABLE,
                 "--print-env"], env=self.env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stdout, "")
        with open(victim) as f:
            self.assertEqual(f.read(), "precious")

    def test_an_agent_lock_others_can_write_is_refused(self):
        lock = os.path.join(self.shm, "greyhound.open.agent.lock")
        with open(lock, "w"):
            pass
        os.chmod(lock, 0o666)
        r = run([os.path.join(BIN, "greyhound-agent"), "--job", "open", "--shm-dir", self.shm, "--redis", UNREACHABLE],
                env=self.env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("writable by other users (mode 0666)", r.stderr)

    def test_simcluster_refuses_a_work_dir_others_can_write(self):
        shared = os.path.join(self.shm, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o1777)
        r = run([os.path.join(BIN, "greyhound-simcluster"), "--no-greyhound", "--duration-s", "1", "--quiet",
                 "--work-dir", shared], env=self.env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("writable by other users (mode 1777)", r.stderr)
        self.assertEqual(os.listdir(shared), [], "nothing was written there")

    def test_a_password_on_the_command_line_is_hidden_once_the_daemon_runs(self):
        url = "redis://:s3cret-pw@127.0.0.1:1/0"
        for argv in ([os.path.join(BIN, "greyhound-master"), "--job", "pw", "--redis", url],
                     [os.path.join(BIN, "greyhound-agent"), "--job", "pw", "--shm-dir", self.shm, "--redis", url]):
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env, text=True)
            try:
                deadline = time.monotonic() + 10
                cmdline = ""
                while time.monotonic() < deadline:
                    with open("/proc/%d/cmdline" % p.pid) as f:
                        cmdline = f.read()
                    if "*" in cmdline:
                        break
                    time.sleep(0.02)
                self.assertNotIn("s3cret-pw", cmdline)
                self.assertIn("redis://" + "*" * len(":s3cret-pw") + "@127.0.0.1:1/0", cmdline)
            finally:
                p.terminate()
                _, err = p.communicate(timeout=10)
            self.assertIn("give it in a file named by GREYHOUND_REDIS_PASSWORD_FILE", err)
            self.assertNotIn("s3cret-pw", err)

    def simcluster(self, *more):
        return run([os.path.join(BIN, "greyhound-simcluster"), "--tp", "2", "--dp", "2", "--pp", "2",
                    "--gpus-per-node", "4", "--microbatches", "4", "--duration-s", "3", "--quiet",
                    "--work-dir", os.path.join(self.shm, "sim")] + list(more), env=self.env)

    def test_simcluster_refuses_faults_and_chaos_outside_the_cluster(self):
        faults = os.path.join(self.shm, "faults.json")
        with open(faults, "w") as f:
            f.write('{"faults":[{"kind":"gpu","rank":99,"start_s":1,"end_s":2,"slowdown":1.5}]}')
        r = self.simcluster("--no-greyhound", "--faults", faults)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("faults[0].rank: 99 is not a rank of this job (0..7)", r.stderr)
        with open(faults, "w") as f:
            f.write('{"faults":[{"kind":"link","nodes":[0,5],"start_s":1,"end_s":2,"bandwidth_factor":0.5}]}')
        r = self.simcluster("--no-greyhound", "--faults", faults)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("faults[0].nodes: 5 is not a node of this cluster (0..1)", r.stderr)
        for node in ("2", "99999999999"):
            r = self.simcluster("--chaos", '[{"at_s":1,"action":"kill","target":"agent:%s"}]' % node)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--chaos[0].target: agent:%s: the cluster has nodes 0..1" % node, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.shm, "sim", "rank0.out")), "nothing was started")

    def test_a_job_name_redis_keys_cannot_carry_is_refused_where_it_is_given(self):
        # greyhoundctl, the agent and the master refuse it with the reason (two names cut or rewritten alike
        # would share one job's keys); greyhound-run, in front of the job, names the job the sanitised way for
        # the job and its agent alike, and says so.
        for name, why in [("a{b}:c", "'{' at offset 1"), ("x" * 64, "longer than 63 characters")]:
            for argv in ([os.path.join(BIN, "greyhoundctl"), "plan", "--job", name, "--revert", "--redis", UNREACHABLE],
                         [os.path.join(BIN, "greyhoundctl"), "status", "--job", name, "--redis", UNREACHABLE],
                         [os.path.join(BIN, "greyhound-agent"), "--job", name, "--shm-dir", self.shm,
                          "--redis", UNREACHABLE],
                         [os.path.join(BIN, "greyhound-master"), "--job", name, "--redis", UNREACHABLE]):
                r = run(argv, env=self.env)
                self.assertEqual(r.returncode, 2, (argv, r.stdout, r.stderr))
                self.assertIn("--job: the job name", r.stderr, argv)
                self.assertIn(why, r.stderr, argv)
        r = run([os.path.join(BIN, "greyhound-run"), "--job", "a{b}:c", "--no-agent", "--shm-dir", self.shm, "sh", "-c",
                 "echo $GREYHOUND_JOB"], env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "a_b__c")
        self.assertIn("the job is named 'a_b__c' (GREYHOUND_JOB) instead", r.stderr)

    def test_a_placement_file_is_read_with_the_bounded_reader(self):
        # Nested 100,000 deep: refused with the reason (it used to be parsed whole and crash the process).
        path = os.path.join(self.shm, "placement.json")
        with open(path, "w") as f:
            f.write("[" * 100000 + "]" * 100000)
        r = run([os.path.join(BIN, "greyhoundctl"), "plan", "--job", "j", "--placement", path, "--redis", UNREACHABLE],
                env=self.env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--placement: ", r.stderr)
        self.assertIn("deep", r.stderr)
        with open(path, "w") as f:
            f.write("[" + " " * (2 << 20) + "]")  # over the 1 MiB a message may hold
        r = run([os.path.join(BIN, "greyhoundctl"), "plan", "--job", "j", "--placement", path, "--redis", UNREACHABLE],
                env=self.env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("larger than 1048576 bytes", r.stderr)


if __name__ == "__main__":
    BIN = sys.argv.pop(1)
    unittest.main()
