#!/bin/sh
# Slurm Epilog (slurm.conf: Epilog=/opt/greyhound/deploy/slurm/greyhound-epilog.sh), run by slurmd on each
# node when a job ends: stops the job's greyhound-agent there (SIGTERM, then SIGKILL after 10 s) and removes
# the job's rings and the agent's lock from the shared-memory directory. The job's keys in Redis stay (the
# master retires the job once its agents are gone; docs/redis-keys.md). Always exits 0: a node is never
# drained because of greyhound.
[ -r /etc/greyhound/node.env ] && . /etc/greyhound/node.env
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
job="slurm-$SLURM_JOB_ID"
dir=${GREYHOUND_SHM_DIR:-/dev/shm}
lock="$dir/greyhound.$job.agent.lock"
if [ -f "$lock" ] && [ ! -L "$lock" ]; then
  pid=$(head -c 16 "$lock" | tr -cd '0-9')
  # Only a greyhound-agent: a stale pid may belong to another process by now.
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "greyhound-agent" ]; then
    kill -TERM "$pid" 2>/dev/null
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    kill -KILL "$pid" 2>/dev/null
  fi
fi
# The job's files: greyhound.<job>.<rank tag> (rings, the lock), nothing else.
find "$dir" -maxdepth 1 -type f -name "greyhound.$job.*" -delete 2>/dev/null
exit 0
