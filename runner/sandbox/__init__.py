"""Sandboxes: one small interface, several backends chosen by ``BENCH_SANDBOX``.

A sandbox starts a process that sees only what it is given: mounts (host folder -> path inside), a
working directory, an environment, limits and (never by default) the network. Paths in ``argv`` and
``cwd`` are paths as seen inside the sandbox.
"""

from .base import Limits, Mount, Sandbox, SandboxError, folder_mounts
from .registry import get_sandbox, sandbox_python

__all__ = ["Limits", "Mount", "Sandbox", "SandboxError", "folder_mounts", "get_sandbox", "sandbox_python"]
