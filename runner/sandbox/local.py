from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from .base import Limits, Mount, Sandbox


class LocalSandbox(Sandbox):
    """Plain subprocesses with rlimits: no isolation. For development only; refuses untrusted agents."""

    name = "local"
    isolates = False

    def __init__(self, python: str, *, ids: tuple[int, int] | None = None) -> None:
        self.python = python
        self.ids = ids

    @staticmethod
    def translate(value: str, mounts: Sequence[Mount]) -> str:
        """Map a path as seen inside the sandbox to the host path it is mounted from."""
        for mount in sorted(mounts, key=lambda m: len(m.target), reverse=True):
            if mount.hide:  # nothing is masked here: local isolates nothing
                continue
            if value == mount.target:
                return str(mount.source)
            if value.startswith(mount.target.rstrip("/") + "/"):
                return str(mount.source) + value[len(mount.target.rstrip("/")) :]
        return value

    def popen(
        self,
        argv: Sequence[str],
        *,
        mounts: Sequence[Mount],
        cwd: str,
        env: dict[str, str] | None = None,
        limits: Limits | None = None,
        network: bool = False,
        stdin: int | None = subprocess.DEVNULL,
        stdout: int | None = subprocess.PIPE,
        stderr: int | None = subprocess.PIPE,
        pass_fds: Sequence[int] = (),
    ) -> subprocess.Popen:
        full_env = self.environment(env, str(Path(self.python).parent))
        translated_env = {k: self.translate(v, mounts) for k, v in full_env.items()}
        translated_env["HOME"] = translated_env["TMPDIR"] = "/tmp"
        return self.start(
            [self.translate(a, mounts) for a in argv],
            limits=limits or Limits(),
            what="the process",
            cwd=self.translate(cwd, mounts),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            env=translated_env,
            pass_fds=tuple(pass_fds),
        )
