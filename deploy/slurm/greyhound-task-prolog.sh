#!/bin/sh
# Slurm TaskProlog (slurm.conf: TaskProlog=/opt/greyhound/deploy/slurm/greyhound-task-prolog.sh): every task
# of every job step runs with greyhound, as under `greyhound-run` (docs/deploy.md). slurmstepd runs it as the
# job's user before each task and applies the "export NAME=value" lines it prints to the task's environment:
# libgreyhound.so preloaded, GREYHOUND_JOB=slurm-<job id>, GREYHOUND_NODE=<node index>. It also starts the
# node's greyhound-agent for the job, once per node (the agent holds a lock; it leaves by itself when the
# job's ranks have been gone for GREYHOUND_AGENT_IDLE_S, and the Epilog stops it).
# Settings (from slurmd's environment or /etc/greyhound/node.env): GREYHOUND_PREFIX (default /opt/greyhound),
# GREYHOUND_REDIS, GREYHOUND_REDIS_PASSWORD_FILE, GREYHOUND_SHM_DIR (default /dev/shm),
# GREYHOUND_AGENT_IDLE_S (default 120), GREYHOUND_AGENT_LOG (the agent's log; default none). The rank and
# local rank come from SLURM_PROCID and SLURM_LOCALID.
# A failure here never stops the task: it runs without greyhound.
if [ -r /etc/greyhound/node.env ]; then  # KEY=value lines: exported to greyhound-run and the agent
  set -a; . /etc/greyhound/node.env; set +a
fi
prefix=${GREYHOUND_PREFIX:-/opt/greyhound}
[ -n "${SLURM_JOB_ID:-}" ] || exit 0  # not a Slurm task: nothing to do
job="slurm-$SLURM_JOB_ID"
node=${SLURM_NODEID:-0}
idle=${GREYHOUND_AGENT_IDLE_S:-120}
"$prefix/bin/greyhound-run" --job "$job" --node "$node" --print-env \
    --agent-args "--idle-exit-s $idle" --agent-log "${GREYHOUND_AGENT_LOG:-/dev/null}" 2>/dev/null || true
exit 0
