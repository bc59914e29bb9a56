#!/bin/sh
# Slurm Epilog (slurm.conf: Epilog=/opt/greyhound/deploy/slurm/greyhound-epilog.sh), run by slurmd on each
# node when a job ends: stops the job's greyhound-agent there (SIGTERM, then SIGKILL after 10 s) and removes
# the job's rings and the agent's lock from the shared-memory directory. The job's keys in Redis stay (the
# master retires the job once its agents are gone; docs/redis-keys.md). Always exits 0: a node is never
# drained because of greyhound.
if [ -r /etc/greyhound/node.env ]; then
  set -a; . /etc/greyhound/node.env; set +a
fi
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
job="slurm-$SLURM_JOB_ID"
dir=${GREYHOUND_SHM_DIR:-/dev/shm}
lock="$dir/greyhound.$job.agent.lock"

# The job's agent: a process named greyhound-agent whose environment names this job (the lock file is the
# job user's to write: its pid alone proves nothing, and may have been reused).
is_agent() {
  [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "greyhound-agent" ] &&
    tr '\0' '\n' < "/proc/$1/environ" 2>/dev/null | grep -qx "GREYHOUND_JOB=$job"
}
if [ -f "$lock" ] && [ ! -L "$lock" ]; then
  pid=$(timeout 2 head -c 16 "$lock" 2>/dev/null | tr -cd '0-9')
  if [ -n "$pid" ] && is_agent "$pid"; then
    kill -TERM "$pid" 2>/dev/null
    i=0
    while is_agent "$pid" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    is_agent "$pid" && kill -KILL "$pid" 2>/dev/null
  fi
fi
# The job's files: greyhound.<job>.<rank tag> (rings, the lock), nothing else.
find "$dir" -maxdepth 1 -type f -name "greyhound.$job.*" -delete 2>/dev/null
exit 0
