"""What a deployment says about its sandboxes. The runner reads it from settings (``runner.execution.sandboxes``);
nothing in this package reads settings itself."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

KINDS = ("bwrap", "docker", "local")


@dataclass(frozen=True)
class SandboxConfig:
    kind: str = "bwrap"
    #: The interpreter that runs task scripts and agents inside; "" means this one (docker: the image's).
    python: str = ""
    #: Who sandboxed code runs as when the worker is root.
    uid: int = 65534
    gid: int = 65534
    docker_host: str = ""
    docker_image: str = "mlab-bench-sandbox:latest"
    docker_user: str = "65534:65534"
    #: Seconds the docker client waits for one answer of the engine.
    docker_timeout_s: float = 120
    #: bwrap: a run's scripts run one after another in one sandbox kept for the run, by a supervisor inside it.
    persistent: bool = True
    #: bwrap: the device files of this worker's GPUs (a glob).
    gpu_devices: str = "/dev/nvidia[0-9]*"

    @property
    def interpreter(self) -> str:
        if self.python:
            return self.python
        return "/usr/local/bin/python" if self.kind == "docker" else sys.executable

    @property
    def ids(self) -> tuple[int, int] | None:
        """(uid, gid) that sandboxed code runs as, or None when the worker is not root (it runs as the worker)."""
        if os.geteuid() != 0:
            return None
        return self.uid, self.gid
