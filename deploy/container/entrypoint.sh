#!/bin/sh
# Container entrypoint: runs the container's command under greyhound-run (docs/deploy.md), so an unmodified
# training image gets the NCCL hook and its node's agent. In a Dockerfile:
#   COPY --from=greyhound /opt/greyhound /opt/greyhound
#   ENTRYPOINT ["/opt/greyhound/deploy/container/entrypoint.sh"]
#   CMD ["torchrun", "--nproc-per-node", "8", "pretrain_gpt.py", "..."]
# Settings from the container's environment: GREYHOUND_JOB (else JOB_NAME; with neither, the command runs
# without greyhound), GREYHOUND_NODE (default: NODE_RANK, GROUP_RANK), GREYHOUND_REDIS,
# GREYHOUND_REDIS_PASSWORD_FILE (a mounted secret), GREYHOUND_PREFIX (default /opt/greyhound),
# GREYHOUND_DISABLE=1 to run the command as it is.
prefix=${GREYHOUND_PREFIX:-/opt/greyhound}
if [ "$#" -eq 0 ]; then
  echo "greyhound entrypoint: no command to run" >&2
  exit 2
fi
if [ "${GREYHOUND_DISABLE:-0}" = "1" ] || [ ! -x "$prefix/bin/greyhound-run" ]; then
  exec "$@"
fi
# Every container of one training job must name the same job: from the environment only, never guessed.
job=${GREYHOUND_JOB:-${JOB_NAME:-}}
if [ -z "$job" ]; then
  echo "greyhound entrypoint: set GREYHOUND_JOB (or JOB_NAME) to the training job's name; running without greyhound" >&2
  exec "$@"
fi
export GREYHOUND_JOB="$job"
exec "$prefix/bin/greyhound-run" -- "$@"
