from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .base import Limits, Mount, Sandbox, SandboxError, host_python_paths

# The read-only system: enough to run Python and its native libraries, nothing of the host's data.
SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc"]
HIDDEN_ETC = ["/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/ssl/private"]


class BwrapSandbox(Sandbox):
    """bubblewrap: unprivileged Linux namespaces. No network, read-only system, private /tmp and /proc."""

    name = "bwrap"

    def __init__(self, python: str) -> None:
        self.bwrap = shutil.which("bwrap")
        if not self.bwrap:
            raise SandboxError("BENCH_SANDBOX=bwrap but bubblewrap is not installed (apt-get install bubblewrap)")
        self.python = python
        self.python_dirs = host_python_paths(python)

    def command(
        self,
        argv: Sequence[str],
        *,
        mounts: Sequence[Mount],
        cwd: str,
        env: dict[str, str],
        network: bool,
        tmp_mb: int = 1024,
    ) -> list[str]:
        cmd = [
            self.bwrap,
            "--die-with-parent",
            "--new-session",
            "--unshare-all",
            "--as-pid-1",
            "--hostname",
            "sandbox",
        ]
        if network:
            cmd.append("--share-net")
        for path in SYSTEM_DIRS:
            if os.path.islink(path):
                cmd += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                cmd += ["--ro-bind", path, path]
        for path in HIDDEN_ETC:
            if os.path.isdir(path):
                cmd += ["--tmpfs", path]
            elif os.path.exists(path):
                cmd += ["--ro-bind", "/dev/null", path]
        cmd += ["--proc", "/proc", "--dev", "/dev", "--size", str(tmp_mb * 1024 * 1024), "--tmpfs", "/tmp"]
        cmd += ["--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu"]
        # After the private /tmp: an interpreter installed under /tmp (a CI checkout) stays visible.
        for path in self.python_dirs:
            cmd += ["--ro-bind", str(path), str(path)]
        for mount in mounts:
            cmd += ["--bind" if mount.writable else "--ro-bind", str(mount.source), mount.target]
        cmd += ["--chdir", cwd, "--clearenv"]
        for key, value in env.items():
            cmd += ["--setenv", key, value]
        return [*cmd, "--", *argv]

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
    ) -> subprocess.Popen:
        full_env = self.environment(env, str(Path(self.python).parent))
        limits = limits or Limits()
        cmd = self.command(argv, mounts=mounts, cwd=cwd, env=full_env, network=network, tmp_mb=limits.tmp_mb)
        return self.start(
            cmd,
            limits=limits,
            what="bubblewrap",
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            env={"PATH": "/usr/bin:/bin"},
        )
