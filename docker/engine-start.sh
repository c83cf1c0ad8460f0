#!/usr/bin/env bash
# Starts a Docker engine for the docker sandbox when none answers (as root): dockerd with the overlay2 storage
# driver on a data root that is a loop-mounted ext4 image (overlay2 needs a real filesystem under it; the vfs
# driver, which needs none, copies every layer of the image for each container). The image file and the mount are
# made when missing and kept, so images built once stay for the next start.
#
#   docker/engine-start.sh          does nothing when `docker info` answers; else mounts and starts dockerd
#
# Environment: BENCH_DOCKER_STATE (/var/lib/mlab-bench: docker.img and the docker/ data root in it),
# BENCH_DOCKER_IMG_GB (30, the image file's size; sparse, it takes what is written), DOCKER_HOST (the engine to
# ask and, if it is a unix socket, where the new engine listens), DOCKERD_ARGS (more dockerd arguments: a second
# engine beside another needs its own --exec-root and --pidfile, and -b with a bridge of its own and
# --iptables=false; never --bridge=none, with which dockerd deletes docker0, the running engine's bridge).
set -euo pipefail

state="${BENCH_DOCKER_STATE:-/var/lib/mlab-bench}"
image="$state/docker.img"
data_root="$state/docker"
log="$state/dockerd.log"

say() { printf '%s\n' "engine-start: $*" >&2; }

if docker info >/dev/null 2>&1; then
  say "an engine answers at ${DOCKER_HOST:-the default socket}"
  exit 0
fi
command -v dockerd >/dev/null || { say "dockerd is not installed (apt-get install docker.io)"; exit 1; }

mkdir -p "$data_root"
if ! mountpoint -q "$data_root"; then
  if [ ! -f "$image" ]; then
    truncate -s "${BENCH_DOCKER_IMG_GB:-30}G" "$image"
    mkfs.ext4 -q -F "$image"
    say "made $image"
  fi
  mount -o loop "$image" "$data_root"
fi

args=(--storage-driver=overlay2 --data-root "$data_root")
case "${DOCKER_HOST:-}" in
  unix://*) args+=(-H "$DOCKER_HOST") ;;
esac
# shellcheck disable=SC2206 # DOCKERD_ARGS is a list of words
args+=(${DOCKERD_ARGS:-})
setsid dockerd "${args[@]}" >>"$log" 2>&1 </dev/null &
for _ in $(seq 60); do
  if docker info >/dev/null 2>&1; then
    say "dockerd started (overlay2 on $data_root; log: $log)"
    exit 0
  fi
  sleep 1
done
say "dockerd did not answer within 60 s; the end of $log:"
tail -20 "$log" >&2
exit 1
