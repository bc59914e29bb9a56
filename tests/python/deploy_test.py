"""The deployment pieces in deploy/, tried as far as this machine allows (no systemd, Slurm or container engine
runs here).

usage: /usr/bin/python3 deploy_test.py BUILD_DIR

- systemd: the unit parses, and its ExecStart, pointed at this build and a private redis-server, is a master
  that serves /healthz and stops cleanly on SIGTERM (what systemctl stop sends).
- Slurm: the TaskProlog, run as slurmstepd runs it (SLURM_* set), prints the export lines that preload the hook
  and name the job and node, and starts the node's agent once; the Epilog stops that agent and removes the
  job's files, and only the job's.
- The container entrypoint runs the command under greyhound-run, or as it is with GREYHOUND_DISABLE=1.
"""
import configparser
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DEPLOY = os.path.join(ROOT, "deploy")
sys.path.insert(0, os.path.join(HERE, "megatron"))
import support  # noqa: E402

BUILD = None


def running_agent(pid):
    """True when `pid` is a greyhound-agent that has not exited (an exited one nobody reaped is a zombie)."""
    try:
        with open("/proc/%d/comm" % pid) as f:
            if f.read().strip() != "greyhound-agent":
                return False
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def agent_pid(shm, job):
    try:
        with open(os.path.join(shm, "greyhound.%s.agent.lock" % job)) as f:
            pid = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0
    return pid if pid > 0 and running_agent(pid) else 0


def stop_agent(shm, job):
    pid = agent_pid(shm, job)
    if pid:
        os.kill(pid, 15)
        support.wait_for("the agent to stop", lambda: not agent_pid(shm, job), timeout_s=10)


class Deploy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.redis = support.RedisServer()
        cls.dir = tempfile.mkdtemp(prefix="gh-py-deploy-")

    @classmethod
    def tearDownClass(cls):
        cls.redis.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def env(self, **more):
        e = dict(os.environ, GREYHOUND_PREFIX=BUILD, GREYHOUND_REDIS=self.redis.url)
        e.update(more)
        return e

    def test_the_systemd_unit_runs_a_master(self):
        unit = configparser.ConfigParser(interpolation=None, strict=True)
        unit.optionxform = str
        unit.read(os.path.join(DEPLOY, "systemd", "greyhound-master.service"))
        self.assertEqual(set(unit.sections()), {"Unit", "Service", "Install"})
        self.assertEqual(unit["Service"]["Restart"], "on-failure")
        self.assertEqual(unit["Install"]["WantedBy"], "multi-user.target")
        argv = shlex.split(unit["Service"]["ExecStart"])
        self.assertEqual(argv[0], "/opt/greyhound/bin/greyhound-master")
        self.assertIn("127.0.0.1:9400", argv, "the endpoint stays on loopback by default")
        # This build instead of /opt/greyhound, a free port, the log in a temporary directory.
        port = support.free_port()
        argv[0] = os.path.join(BUILD, "bin", "greyhound-master")
        argv[argv.index("127.0.0.1:9400")] = "127.0.0.1:%d" % port
        argv[argv.index("--event-log") + 1] = os.path.join(self.dir, "master-events.jsonl")
        master = subprocess.Popen(argv, env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            def healthy():
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=1) as r:
                        return r.status == 200
                except OSError:
                    return False
            support.wait_for("the unit's master to answer /healthz", healthy, timeout_s=20)
        finally:
            master.terminate()
            out = master.communicate(timeout=20)[0].decode(errors="replace")
        self.assertEqual(master.returncode, 0, out)

    def test_the_slurm_prolog_and_epilog(self):
        shm = tempfile.mkdtemp(dir=self.dir)
        env = self.env(SLURM_JOB_ID="4242", SLURM_NODEID="1", SLURM_PROCID="3", SLURM_LOCALID="1",
                       GREYHOUND_SHM_DIR=shm, GREYHOUND_AGENT_IDLE_S="60")
        prolog = os.path.join(DEPLOY, "slurm", "greyhound-task-prolog.sh")
        out = subprocess.run([prolog], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        exports = dict(line[len("export "):].split("=", 1) for line in out.stdout.decode().splitlines()
                       if line.startswith("export "))
        self.assertEqual(exports["GREYHOUND_JOB"], "slurm-4242")
        self.assertEqual(exports["GREYHOUND_NODE"], "1")
        self.assertEqual(exports["GREYHOUND_SHM_DIR"], shm)
        hook = exports["LD_PRELOAD"].split(":")[0]
        self.assertTrue(hook.endswith("/lib/libgreyhound.so") and os.path.exists(hook), hook)
        pid = support.wait_for("the node's agent", lambda: agent_pid(shm, "slurm-4242"), timeout_s=10)
        # A second task of the job on the node: the same agent, not a second one.
        out = subprocess.run([prolog], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(out.returncode, 0)
        time.sleep(0.5)
        self.assertEqual(agent_pid(shm, "slurm-4242"), pid)
        # Outside Slurm the prolog does nothing.
        bare = dict(env)
        del bare["SLURM_JOB_ID"]
        out = subprocess.run([prolog], env=bare, stdout=subprocess.PIPE, timeout=30)
        self.assertEqual((out.returncode, out.stdout), (0, b""))
        # Another job's epilog on the node, its lock naming this job's agent (the lock is the job user's to
        # write): that agent is not its own, and lives on.
        with open(os.path.join(shm, "greyhound.slurm-777.agent.lock"), "w") as f:
            f.write(str(pid))
        out = subprocess.run([os.path.join(DEPLOY, "slurm", "greyhound-epilog.sh")], env=dict(env, SLURM_JOB_ID="777"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(agent_pid(shm, "slurm-4242"), pid)
        # The job's files, and another job's that must stay.
        for name in ("greyhound.slurm-4242.r0.123", "greyhound.slurm-42420.r0.9", "other"):
            open(os.path.join(shm, name), "w").close()
        out = subprocess.run([os.path.join(DEPLOY, "slurm", "greyhound-epilog.sh")], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(agent_pid(shm, "slurm-4242"), 0)
        self.assertFalse(running_agent(pid))
        self.assertEqual(sorted(os.listdir(shm)), ["greyhound.slurm-42420.r0.9", "other"])

    def test_the_container_entrypoint(self):
        shm = tempfile.mkdtemp(dir=self.dir)
        entry = os.path.join(DEPLOY, "container", "entrypoint.sh")
        env = self.env(GREYHOUND_JOB="ctr-job", GREYHOUND_SHM_DIR=shm)
        try:
            out = subprocess.run([entry, "sh", "-c", 'echo "$LD_PRELOAD|$GREYHOUND_JOB"; exit 7'], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            self.assertEqual(out.returncode, 7, out.stderr)  # the command's own status
            preload, job = out.stdout.decode().strip().split("|")
            self.assertTrue(preload.split(":")[0].endswith("/lib/libgreyhound.so"), preload)
            self.assertEqual(job, "ctr-job")
            support.wait_for("the container's agent", lambda: agent_pid(shm, "ctr-job"), timeout_s=10)
        finally:
            stop_agent(shm, "ctr-job")
        off = dict(env, GREYHOUND_DISABLE="1")
        off.pop("LD_PRELOAD", None)
        out = subprocess.run([entry, "sh", "-c", 'echo "[$LD_PRELOAD]"'], env=off, stdout=subprocess.PIPE, timeout=30)
        self.assertEqual(out.stdout.decode().strip(), "[]")
        out = subprocess.run([entry], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(out.returncode, 2)
        self.assertIn(b"no command", out.stderr)
        # No job named: the containers of one job could not agree on it, so the command runs bare.
        unnamed = dict(env)
        del unnamed["GREYHOUND_JOB"]
        unnamed.pop("JOB_NAME", None)
        unnamed.pop("LD_PRELOAD", None)
        out = subprocess.run([entry, "sh", "-c", 'echo "[$LD_PRELOAD]"'], env=unnamed, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(out.stdout.decode().strip(), "[]")
        self.assertIn(b"set GREYHOUND_JOB", out.stderr)


if __name__ == "__main__":
    BUILD = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
