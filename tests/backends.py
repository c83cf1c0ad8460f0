"""The sandbox backends this machine has, for tests parametrised over them: bwrap where bubblewrap is installed,
docker where an engine answers and holds the sandbox image (docker/build-images.sh builds it)."""

from __future__ import annotations

import functools
import shutil

import pytest


@functools.cache
def docker_missing() -> str:
    """Why the docker backend cannot be tried here, or '' when it can."""
    from django.conf import settings

    from runner.execution.sandboxes import sandbox_config
    from runner.sandbox import SandboxError
    from runner.sandbox.docker import docker_client

    try:
        client = docker_client(sandbox_config("docker"))
    except SandboxError as exc:
        return str(exc)
    try:
        client.images.get(settings.BENCH_DOCKER_IMAGE)
    except Exception:  # noqa: BLE001 - ImageNotFound, or the engine went away meanwhile
        return f"the engine has no image {settings.BENCH_DOCKER_IMAGE} (docker/build-images.sh builds it)"
    finally:
        client.close()
    return ""


def bwrap_missing() -> str:
    return "" if shutil.which("bwrap") else "bubblewrap is not installed"


#: Both isolating backends, for ``pytest.mark.parametrize("backend", BACKENDS)`` or the ``backend`` fixture; a test
#: given one this machine lacks is skipped (``skip_unless_backend``). ``-m docker`` selects the docker ones.
BACKENDS = [pytest.param("bwrap", id="bwrap"), pytest.param("docker", marks=pytest.mark.docker, id="docker")]


def skip_unless_backend(kind: str) -> None:
    """Skip the test, with the reason, when this machine lacks the backend."""
    reason = docker_missing() if kind == "docker" else bwrap_missing()
    if reason:
        pytest.skip(reason)
