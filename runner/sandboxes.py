"""The sandboxes this deployment's settings ask for (``BENCH_SANDBOX``, ``BENCH_SANDBOX_*``, ``BENCH_DOCKER_*``)."""

from __future__ import annotations

from django.conf import settings

from .sandbox import Sandbox, SandboxConfig, sandbox_create

#: SandboxConfig field -> the setting it comes from.
SETTINGS = {
    "python": "BENCH_SANDBOX_PYTHON",
    "uid": "BENCH_SANDBOX_UID",
    "gid": "BENCH_SANDBOX_GID",
    "docker_host": "BENCH_DOCKER_HOST",
    "docker_image": "BENCH_DOCKER_IMAGE",
    "docker_user": "BENCH_DOCKER_USER",
}


def sandbox_config(kind: str | None = None) -> SandboxConfig:
    """The configured sandbox, or one of another kind (a run's own) with the same settings."""
    return SandboxConfig(kind=kind or settings.BENCH_SANDBOX, **{f: getattr(settings, s) for f, s in SETTINGS.items()})


def get_sandbox(kind: str | None = None) -> Sandbox:
    """A sandbox of the given kind (a run's own), or of the configured one."""
    return sandbox_create(sandbox_config(kind))


def sandbox_python() -> str:
    """The interpreter that runs task scripts and agents inside the configured sandboxes."""
    return sandbox_config().interpreter
