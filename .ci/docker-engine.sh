#!/usr/bin/env bash
# Make a Docker engine reachable, for CI and for this machine kind (root, no systemd).
#
#   .ci/docker-engine.sh           # idempotent: does nothing when an engine already answers
#
# 1. An engine answers (DOCKER_HOST or /var/run/docker.sock): done.
# 2. Otherwise install docker.io with apt if dockerd is missing (needs root), start dockerd in the
#    background and wait until it answers. The storage driver is overlay2 where this kernel can
#    mount an overlay on the engine's data root (checked with a real mount first), else vfs, which
#    works on any file system but copies a whole image for every container; the script says which.
#    LABKIT_DOCKER_STORAGE=vfs|overlay2 forces one.
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

# Can this kernel mount an overlay whose upper layer lives on the engine's data root? (Not on
# overlayfs, tmpfs in some sandboxes, or without the module.) A real mount answers; /proc alone does not.
overlay_works() {
    local root=/var/lib/docker probe
    mkdir -p "$root"
    probe=$(mktemp -d "$root/.labkit-overlay-probe.XXXXXX") || return 1
    mkdir -p "$probe"/{lower,upper,work,merged}
    echo ok >"$probe/lower/f"
    local ok=1
    if mount -t overlay overlay -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" \
        "$probe/merged" 2>/dev/null; then
        [ "$(cat "$probe/merged/f" 2>/dev/null)" = ok ] && echo new >"$probe/merged/g" 2>/dev/null && ok=0
        umount "$probe/merged" 2>/dev/null || true
    fi
    rm -rf "$probe"
    return $ok
}

storage_driver() {
    case "${LABKIT_DOCKER_STORAGE:-}" in
        vfs|overlay2) echo "$LABKIT_DOCKER_STORAGE"; return ;;
        "") ;;
        *) say "LABKIT_DOCKER_STORAGE must be vfs or overlay2, not '$LABKIT_DOCKER_STORAGE'"; exit 1 ;;
    esac
    if overlay_works; then echo overlay2; else echo vfs; fi
}

# A daemon may be running but not answering yet (still starting): wait for it instead of a second one.
if [ -f /var/run/docker.pid ] && kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    say "dockerd (pid $(cat /var/run/docker.pid)) is running; waiting for it to answer"
else
    rm -f /var/run/docker.pid
    DRIVER=$(storage_driver)
    if [ "$DRIVER" = overlay2 ]; then
        say "overlay mounts work here: using overlay2 (containers share their image's layers)"
    else
        say "no overlay mount on /var/lib/docker here: using vfs (every container copies its whole image)"
    fi
    say "starting dockerd --storage-driver=$DRIVER (log: $LOG)"
    mkdir -p "$(dirname "$LOG")"
    # setsid + nohup: the daemon outlives this script and the shell that ran it.
    setsid nohup dockerd --storage-driver="$DRIVER" >>"$LOG" 2>&1 </dev/null &
fi

for _ in $(seq 1 "$((WAIT_S * 2))"); do
    if engine_answers; then
        say "engine ready ($(docker info --format '{{.ServerVersion}}, storage {{.Driver}}' 2>/dev/null || echo up))"
        exit 0
    fi
    sleep 0.5
done
say "dockerd did not answer within ${WAIT_S} s; last log lines:"
tail -n 30 "$LOG" >&2 || true
exit 1
