#!/usr/bin/env bash
# Make a Docker engine reachable, for CI and for this machine kind (root, no systemd).
#
#   .ci/docker-engine.sh           # idempotent: does nothing when an engine already answers
#
# 1. An engine answers (DOCKER_HOST or /var/run/docker.sock): done.
# 2. Otherwise install docker.io with apt if dockerd is missing (needs root), start
#    `dockerd --storage-driver=vfs` in the background (vfs works on any file system, also
#    inside another container; overlay2 often does not), and wait until it answers.
#
# The engine keeps running after this script exits; its log is $LABKIT_DOCKERD_LOG.
# Stop it with: kill "$(cat /var/run/docker.pid)"
set -euo pipefail

LOG=${LABKIT_DOCKERD_LOG:-/var/log/labkit-dockerd.log}
WAIT_S=${LABKIT_DOCKERD_WAIT_S:-60}
LOCK=/var/lock/labkit-docker-engine.lock

say() { echo "docker-engine: $*" >&2; }

engine_answers() {
    # The docker CLI if present (it honours DOCKER_HOST), else the API on the default socket.
    if command -v docker >/dev/null 2>&1; then
        timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1
    elif [ -S /var/run/docker.sock ] && command -v curl >/dev/null 2>&1; then
        timeout 10 curl -sf --unix-socket /var/run/docker.sock http://localhost/_ping >/dev/null 2>&1
    else
        return 1
    fi
}

if engine_answers; then
    say "an engine is already reachable"
    exit 0
fi

if [ "$(id -u)" != 0 ]; then
    say "no engine is reachable and starting one needs root: run this script as root (or sudo dockerd)."
    exit 1
fi

# Two jobs starting the engine at once must not start two daemons.
mkdir -p "$(dirname "$LOCK")"
exec 9>"$LOCK"
flock -w 300 9

if engine_answers; then  # started by whoever held the lock
    say "an engine is already reachable"
    exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
    say "installing docker.io with apt ..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends docker.io iptables ca-certificates >/dev/null
fi

# A daemon may be running but not answering yet (still starting): wait for it instead of a second one.
if [ -f /var/run/docker.pid ] && kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    say "dockerd (pid $(cat /var/run/docker.pid)) is running; waiting for it to answer"
else
    rm -f /var/run/docker.pid
    say "starting dockerd --storage-driver=vfs (log: $LOG)"
    mkdir -p "$(dirname "$LOG")"
    # setsid + nohup: the daemon outlives this script and the shell that ran it.
    setsid nohup dockerd --storage-driver=vfs >>"$LOG" 2>&1 </dev/null &
fi

for _ in $(seq 1 "$((WAIT_S * 2))"); do
    if engine_answers; then
        say "engine ready ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo up))"
        exit 0
    fi
    sleep 0.5
done
say "dockerd did not answer within ${WAIT_S} s; last log lines:"
tail -n 30 "$LOG" >&2 || true
exit 1
