#!/bin/sh
# Gets a Docker engine and a base image ready for the container tests, where this machine allows:
# as root, installs Debian's docker.io, docker-compose and debootstrap, starts dockerd when none answers, and
# builds the base image from a debootstrap root (docker/base.sh; no registry can be pulled from).
# Where that cannot be done it says why and exits 0 (the container tests then skip, saying so), or 1 in CI
# (CI set), where the container tests must run. Exits 1 too when an engine answers but the base image cannot
# be built.
# Usage: docker/engine.sh [BASE_TAG]   (then `make images BASE_IMAGE=BASE_TAG`)
set -u
BASE=${1:-baobab-base:bookworm}
LOG=${DOCKERD_LOG:-/var/log/baobab-dockerd.log}

say() { echo "docker-engine: $*" >&2; }
# No engine here: outside CI the container tests skip; in CI that is a broken setup.
unavailable() {
    if [ -n "${CI:-}" ]; then say "$*; CI needs the container tests"; exit 1; fi
    say "$*; the container tests will be skipped"
    exit 0
}

if ! docker info >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        unavailable "no Docker engine answers and this is not root"
    fi
    if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1 \
        || ! command -v docker-compose >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        if ! { apt-get update -qq && apt-get install -y -qq docker.io docker-compose debootstrap >/dev/null; }; then
            unavailable "docker.io could not be installed"
        fi
    fi
    # its own session, no terminal and no pipe of ours: it outlives this script and holds nothing open
    setsid nohup dockerd >"$LOG" 2>&1 </dev/null &
    tries=0
    until docker info >/dev/null 2>&1; do
        sleep 1
        tries=$((tries + 1))
        if [ "$tries" -gt 60 ] || ! pgrep -x dockerd >/dev/null; then
            tail -n 5 "$LOG" >&2
            unavailable "dockerd did not start (see $LOG)"
        fi
    done
    say "dockerd started (log: $LOG)"
fi

if ! docker image inspect "$BASE" >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ] || ! command -v debootstrap >/dev/null 2>&1; then
        unavailable "base image $BASE is missing and docker/base.sh needs root and debootstrap"
    fi
    sh "$(dirname "$0")/base.sh" "$BASE" >/dev/null || { say "docker/base.sh failed"; exit 1; }
fi
say "engine and $BASE ready"
