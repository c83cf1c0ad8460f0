from __future__ import annotations

import functools
import os
import resource
import subprocess
import sysconfig
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .cgroups import Cgroup


class SandboxError(Exception):
    """The sandbox could not start or run a process; the message says why."""


@dataclass(frozen=True)
class Mount:
    source: Path
    target: str
    writable: bool = False
    #: "file" or "folder": the target, a path the sandbox has already, is masked (an empty file or folder) instead
    #: of bound from ``source`` (masks.py).
    hide: str = ""


@dataclass(frozen=True)
class Limits:
    """Resource limits for everything started in one sandbox. None = no limit.

    Memory and processes are enforced by a cgroup of the sandbox's own where the host allows one (real memory;
    holds for root too; counts only this sandbox's processes), otherwise by rlimits (address space per process;
    RLIMIT_NPROC, which root ignores and which counts all the processes of the user).
    """

    memory_mb: int | None = 4096
    cpu_seconds: int | None = None
    processes: int | None = 256
    file_size_mb: int | None = 2048
    open_files: int | None = 4096
    tmp_mb: int = 1024
    cpus: float | None = None  # CPU share (docker); bwrap relies on the thread settings of the environment
    gpus: int = 0

    def apply(self, *, cgroup: Cgroup | None = None) -> None:
        """In the child before exec: join the cgroup and set rlimits; inherited by all the sandbox starts."""
        if cgroup is not None:
            cgroup.enter()
        for which, soft, hard in self.rlimits(cgroup=cgroup is not None):
            resource.setrlimit(which, (soft, hard))

    def rlimits(self, *, cgroup: bool, extra_processes: int = 0) -> list[tuple[int, int, int]]:
        """(resource, soft, hard) for every rlimit these limits set. With a cgroup, memory and processes are the
        cgroup's; without, ``extra_processes`` are what the sandbox itself keeps running beside the code."""
        processes = self.processes and self.processes + extra_processes
        pairs = [
            (resource.RLIMIT_AS, None if cgroup else self.memory_mb and self.memory_mb * 1024 * 1024 * 2),
            (resource.RLIMIT_CPU, self.cpu_seconds),
            # A cgroup counts this sandbox's processes; RLIMIT_NPROC would count every process of the user, so
            # one sandbox's processes would starve another's: it is the fallback only.
            (resource.RLIMIT_NPROC, None if cgroup else processes),
            (resource.RLIMIT_FSIZE, self.file_size_mb and self.file_size_mb * 1024 * 1024),
            (resource.RLIMIT_NOFILE, self.open_files),
            (resource.RLIMIT_CORE, 0),
        ]
        # CPU: SIGXCPU at the limit (a message the agent can read), SIGKILL a little later if ignored.
        return [
            (which, value, value + 5 if which == resource.RLIMIT_CPU else value)
            for which, value in pairs
            if value is not None
        ]


BASE_ENV = {
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "PYTHONUNBUFFERED": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "MPLCONFIGDIR": "/tmp/matplotlib",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
}


class KeptSandbox(Protocol):
    """A sandbox kept for many commands (``Sandbox.keep``; ``supervised.SupervisedSandbox`` is one): launched ahead
    (``launch``) or started on the first command, ended with everything in it by ``close``."""

    def launch(self) -> None:
        """Start the sandbox without waiting for it to be ready; the first command waits for what is left."""

    def popen(
        self, argv: Sequence[str], *, cwd: str, env: dict[str, str] | None, limits: Limits, timeout: float | None = None
    ) -> Any:
        """Start ``argv`` in the sandbox; the answer is a process as the runner's process functions take one."""

    def close(self) -> None: ...


class Sandbox(ABC):
    name: str = ""
    #: False for backends that do not isolate (development only): they refuse untrusted agents.
    isolates: bool = True
    #: Whether popen can hand extra file descriptors to the process (pass_fds).
    passes_fds: bool = True
    #: The interpreter inside the sandbox.
    python: str = "python"
    #: (uid, gid) that sandboxed code runs as, or None when it runs as the worker (a worker that is not root).
    ids: tuple[int, int] | None = None

    @property
    def protects_links(self) -> bool:
        """Whether sandboxed code runs as a user that cannot change root's read-only files, so a workspace may
        hard-link the task's read-only data to shared blobs instead of copying it."""
        return self.isolates and self.ids is not None

    def gpu_env(self, gpus: int) -> dict[str, str]:
        """The environment that tells code which GPUs are its own (where the backend does not say it itself)."""
        return {}

    @abstractmethod
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
        """Start argv inside the sandbox, in a new session (so the whole group can be killed)."""

    @staticmethod
    def start(cmd: list[str], *, limits: Limits, what: str, **popen_kwargs) -> subprocess.Popen:
        """Popen in a new session, in a fresh cgroup (where available) with the limits applied.

        Another worker that starts up removes this worker's groups when they hold no process (a dead worker's), so
        a group just made may go before the child enters it: the child then fails to start, and is started again
        in a new group."""
        for attempt in range(3):
            cgroup = Cgroup.create(memory_mb=limits.memory_mb, processes=limits.processes)
            try:
                enter = functools.partial(limits.apply, cgroup=cgroup)
                proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=enter, **popen_kwargs)
            except subprocess.SubprocessError as exc:  # raised in the child before exec
                vanished = cgroup is not None and not all(path.is_dir() for path in cgroup.paths.values())
                if cgroup is not None:
                    cgroup.remove()
                if vanished and attempt < 2:
                    continue
                raise SandboxError(f"could not start {what}: {exc}") from exc
            except OSError as exc:
                if cgroup is not None:
                    cgroup.remove()
                raise SandboxError(f"could not start {what}: {exc}") from exc
            break
        proc.cgroup = cgroup
        proc.limits = limits
        return proc

    def keep(self, *, mounts: Sequence[Mount], limits: Limits) -> KeptSandbox | None:
        """A sandbox kept for many commands (launched ahead, or started on the first), or None where this backend
        starts one per process."""
        return None

    def environment(self, env: dict[str, str] | None, python_bin: str) -> dict[str, str]:
        """The command's environment: the base one with ``env`` on top; a PATH in ``env`` is searched first."""
        env = dict(env or {})
        path = f"{python_bin}:/usr/local/bin:/usr/bin:/bin"
        return BASE_ENV | env | {"PATH": f"{env['PATH']}:{path}" if env.get("PATH") else path}


def host_python_paths(python: str) -> list[Path]:
    """Folders an interpreter needs: its venv, its base installation, and where its binary really is."""
    paths = {Path(os.path.realpath(python)).parent.parent}
    exe = Path(python)
    venv = exe.parent.parent
    if (venv / "pyvenv.cfg").is_file():
        paths.add(venv)
        for line in (venv / "pyvenv.cfg").read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                paths.add(Path(value.strip()).parent)
    paths.add(Path(sysconfig.get_config_var("prefix") or "/usr"))
    return sorted(p for p in paths if p.exists() and str(p) not in {"/", "/usr"})


def folder_mounts(host: Path, target: str, read_only_files: Sequence[str]) -> list[Mount]:
    """A folder bound read-write, with some of its files bound read-only on top (they cannot be changed,
    replaced or removed from inside, even though they may be hard links to shared blobs)."""
    mounts = [Mount(host, target, writable=True)]
    for rel in read_only_files:
        path = host / rel
        if path.is_file() and not path.is_symlink():
            mounts.append(Mount(path, f"{target}/{rel}", writable=False))
    return mounts
