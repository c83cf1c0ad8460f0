"""Sandboxes: one small interface, several backends chosen by configuration.

A sandbox starts a process that sees only what it is given: mounts (host folder -> path inside), a
working directory, an environment, limits and (never by default) the network. Paths in ``argv`` and
``cwd`` are paths as seen inside the sandbox. This package knows nothing of Django: its configuration is
passed in (``SandboxConfig``; the runner builds it from settings in ``runner.execution.sandboxes``).
"""

from .base import Limits, Mount, Sandbox, SandboxError, folder_mounts
from .config import SandboxConfig
from .registry import sandbox_create

__all__ = ["Limits", "Mount", "Sandbox", "SandboxConfig", "SandboxError", "folder_mounts", "sandbox_create"]
