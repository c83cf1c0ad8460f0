"""The sandboxes this deployment's settings ask for (``BENCH_SANDBOX``, ``BENCH_SANDBOX_*``, ``BENCH_DOCKER_*``)."""

from __future__ import annotations

import dataclasses
import logging

from django.conf import settings

from ..sandbox import Sandbox, SandboxConfig, SandboxError, sandbox_create

log = logging.getLogger(__name__)

#: SandboxConfig field -> the setting it comes from.
SETTINGS = {
    "python": "BENCH_SANDBOX_PYTHON",
    "uid": "BENCH_SANDBOX_UID",
    "gid": "BENCH_SANDBOX_GID",
    "docker_host": "BENCH_DOCKER_HOST",
    "docker_image": "BENCH_DOCKER_IMAGE",
    "docker_user": "BENCH_DOCKER_USER",
    "docker_timeout_s": "BENCH_DOCKER_TIMEOUT_S",
    "persistent": "BENCH_SANDBOX_PERSISTENT",
    "gpu_devices": "BENCH_GPU_DEVICES",
}


def sandbox_config(kind: str | None = None) -> SandboxConfig:
    """The configured sandbox, or one of another kind (a run's own) with the same settings."""
    return SandboxConfig(kind=kind or settings.BENCH_SANDBOX, **{f: getattr(settings, s) for f, s in SETTINGS.items()})


def get_sandbox(kind: str | None = None, *, run_id: int | None = None) -> Sandbox:
    """A sandbox of the given kind (a run's own), or of the configured one; for a run, with the run's own uid
    when BENCH_SANDBOX_UID_RANGE gives a range."""
    config = sandbox_config(kind)
    uid = run_uid(run_id) if run_id is not None else None
    if uid is not None:
        config = dataclasses.replace(config, uid=uid, gid=uid)
    return sandbox_create(config)


def run_uid(run_id: int) -> int | None:
    """The uid a run's sandboxed code runs as, from BENCH_SANDBOX_UID_RANGE ("FIRST-LAST"); None without one.
    Runs whose ids differ by less than the range's size never share a uid."""
    spec = settings.BENCH_SANDBOX_UID_RANGE.strip()
    if not spec:
        return None
    first, _, last = spec.partition("-")
    if not (first.isdigit() and last.isdigit() and 0 < int(first) <= int(last)):
        raise ValueError(f"BENCH_SANDBOX_UID_RANGE={spec!r}: expected FIRST-LAST, e.g. 200000-200999")
    return int(first) + run_id % (int(last) - int(first) + 1)


def docker_containers_sweep() -> int:
    """Remove the docker sandbox containers that worker processes of this host left when they died (a worker's
    start calls this when the configured sandbox is docker). Returns how many went; 0 without an engine."""
    from ..sandbox.docker import containers_sweep, docker_client

    try:
        return containers_sweep(docker_client(sandbox_config("docker")))
    except SandboxError as exc:
        log.warning("no sweep of docker sandbox containers: %s", exc)
        return 0


def sandbox_python() -> str:
    """The interpreter that runs task scripts and agents inside the configured sandboxes."""
    return sandbox_config().interpreter
