from __future__ import annotations

import sys

from django.conf import settings

from .base import Sandbox, SandboxError


def sandbox_python() -> str:
    """The interpreter that runs task scripts and agents inside sandboxes."""
    if settings.BENCH_SANDBOX_PYTHON:
        return settings.BENCH_SANDBOX_PYTHON
    return "/usr/local/bin/python" if settings.BENCH_SANDBOX == "docker" else sys.executable


def get_sandbox(name: str | None = None) -> Sandbox:
    name = name or settings.BENCH_SANDBOX
    if name == "bwrap":
        from .bwrap import BwrapSandbox

        return BwrapSandbox(sandbox_python())
    if name == "local":
        from .local import LocalSandbox

        return LocalSandbox(sandbox_python())
    if name == "docker":
        from .docker import DockerSandbox

        return DockerSandbox.from_settings()
    raise SandboxError(f"unknown sandbox {name!r}; expected one of bwrap, docker, local")
