from __future__ import annotations

from .base import Sandbox, SandboxError
from .bwrap import BwrapSandbox
from .config import KINDS, SandboxConfig
from .docker import DockerSandbox
from .local import LocalSandbox


def sandbox_create(config: SandboxConfig) -> Sandbox:
    """The sandbox backend the configuration names."""
    if config.kind == "bwrap":
        return BwrapSandbox(
            config.interpreter, ids=config.ids, persistent=config.persistent, gpu_devices=config.gpu_devices
        )
    if config.kind == "local":
        return LocalSandbox(config.interpreter, ids=config.ids)
    if config.kind == "docker":
        return DockerSandbox.connect(config)
    raise SandboxError(f"unknown sandbox {config.kind!r}; expected one of {', '.join(KINDS)}")
