"""Control groups for sandboxes: a memory limit that counts real memory and a process limit that holds even
for root (RLIMIT_NPROC does not apply to uid 0) and counts only that sandbox's processes (RLIMIT_NPROC counts
every process of the user, so sandboxes running as one user would starve each other). Used where the host lets
us create cgroups (v2 with the memory and pids controllers, or v1 hierarchies we can write); elsewhere
sandboxes fall back to rlimits.

Each worker process keeps its groups under a folder of its own, ``mlab-bench/w-<random>``: workers on one host,
even in separate PID namespaces, never share a name. A worker kills only processes in its own groups; of
another worker's folder it removes only what holds no process at all (an empty group left by a worker that
died), and never kills anything in it.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import time
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path

log = logging.getLogger(__name__)
ROOT = Path("/sys/fs/cgroup")
WORKER = f"w-{uuid.uuid4().hex[:16]}"  # this worker's folder of groups (shared by the processes it forks)
_counter = itertools.count()


def _own_path(controller: str) -> str | None:
    """This process's cgroup path for a v1 controller ('' key for v2)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return None


@cache
def _layout() -> tuple[str, dict[str, Path]] | None:
    """('v2', {'': base}) or ('v1', {'memory': base, 'pids': base}) where we may create child groups."""
    try:
        if (ROOT / "cgroup.controllers").exists():
            available = (ROOT / "cgroup.controllers").read_text().split()
            if not {"memory", "pids"} <= set(available):
                return None
            shared = ROOT / "mlab-bench"
            shared.mkdir(exist_ok=True)
            base = shared / WORKER
            base.mkdir(exist_ok=True)
            for parent in (ROOT, shared, base):
                with contextlib.suppress(OSError):
                    (parent / "cgroup.subtree_control").write_text("+memory +pids")
            if not {"memory", "pids"} <= set((base / "cgroup.subtree_control").read_text().split()):
                return None
            _remove_empty_others(shared)
            return "v2", {"": base}
        bases = {}
        for controller in ("memory", "pids"):
            own = _own_path(controller)
            mount = ROOT / controller
            if own is None or not mount.is_dir():
                return None
            shared = mount / own.lstrip("/") / "mlab-bench"
            shared.mkdir(exist_ok=True)
            base = shared / WORKER
            base.mkdir(exist_ok=True)
            _remove_empty_others(shared)
            bases[controller] = base
        return "v1", bases
    except OSError as exc:
        log.info("cgroups are not usable here (%s); sandboxes use rlimits only", exc)
        return None


def _holds_processes(group: Path) -> bool:
    """Whether a group or any group below it holds a process (read, never assumed: unreadable = it does)."""
    try:
        for folder, _dirs, _files in os.walk(group):
            if Path(folder, "cgroup.procs").read_text().strip():
                return True
    except OSError:
        return True
    return False


def _remove_empty_others(shared: Path) -> None:
    """Groups other workers left behind: removed only where no process is in them (a dead worker's); what holds
    a process may be a live worker's sandbox, in a PID namespace we cannot see into, and is left alone."""
    for other in shared.iterdir():
        if not other.is_dir() or other.name == WORKER or _holds_processes(other):
            continue
        for folder, dirs, _files in sorted(os.walk(other, topdown=False), key=lambda w: -len(w[0])):
            for name in dirs:
                with contextlib.suppress(OSError):
                    Path(folder, name).rmdir()
        with contextlib.suppress(OSError):
            other.rmdir()


def available() -> bool:
    return _layout() is not None


@dataclass
class Mark:
    oom_kills: int
    refused_forks: int
    peak_reset: bool = False
    peak_file: object = None


@dataclass
class Cgroup:
    version: str
    paths: dict[str, Path]

    @classmethod
    def create(cls, *, memory_mb: int | None, processes: int | None) -> Cgroup | None:
        layout = _layout()
        if layout is None:
            return None
        version, bases = layout
        name = f"s{os.getpid()}-{next(_counter)}"  # forked pool processes share the worker's folder
        paths = {controller: base / name for controller, base in bases.items()}
        try:
            for path in paths.values():
                path.parent.mkdir(exist_ok=True)  # removed meanwhile by a worker that found it empty
                path.mkdir()
            if version == "v2":
                path = paths[""]
                if memory_mb:
                    (path / "memory.max").write_text(str(memory_mb * 1024 * 1024))
                    with contextlib.suppress(OSError):
                        (path / "memory.swap.max").write_text("0")
                if processes:
                    (path / "pids.max").write_text(str(processes))
            else:
                if memory_mb:
                    (paths["memory"] / "memory.limit_in_bytes").write_text(str(memory_mb * 1024 * 1024))
                if processes:
                    (paths["pids"] / "pids.max").write_text(str(processes))
        except OSError as exc:
            log.warning("could not set up a cgroup (%s); this sandbox uses rlimits only", exc)
            cls(version, paths).remove()
            return None
        return cls(version, paths)

    def enter(self) -> None:
        """Called in the child before exec: move this process (and so all it starts) into the group."""
        pid = str(os.getpid())
        for path in self.paths.values():
            (path / "cgroup.procs").write_text(pid)

    def _read(self, controller: str, name: str) -> str:
        try:
            return (self.paths[controller] / name).read_text()
        except (OSError, KeyError):
            return ""

    @property
    def memory_controller(self) -> str:
        return "" if self.version == "v2" else "memory"

    def peak_memory_mb(self) -> float:
        name = "memory.peak" if self.version == "v2" else "memory.max_usage_in_bytes"
        value = self._read(self.memory_controller, name).strip()
        return int(value) / (1024 * 1024) if value.isdigit() else 0.0

    def oom_killed(self) -> bool:
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        for line in self._read(self.memory_controller, name).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                return True
        if self.version == "v1" and "oom_kill " not in self._read("memory", "memory.oom_control"):
            failcnt = self._read("memory", "memory.failcnt").strip()  # older kernels: the limit was hit
            return failcnt.isdigit() and int(failcnt) > 0
        return False

    def pids_limited(self) -> bool:
        controller = "" if self.version == "v2" else "pids"
        name = "pids.events"
        text = self._read(controller, name)
        return any(line.startswith("max ") and line.split()[1] != "0" for line in text.splitlines())

    def _counter(self, controller: str, name: str, key: str) -> int:
        for line in self._read(controller, name).splitlines():
            found, _, value = line.partition(" ")
            if found == key and value.strip().isdigit():
                return int(value)
        return 0

    def mark(self) -> Mark:
        """Where the group's counters stand before one command of a sandbox that runs many: the command's peak
        memory, OOM kills and refused forks are what changed since (see ``since``)."""
        pids = "" if self.version == "v2" else "pids"
        mark = Mark(
            oom_kills=self._counter(self.memory_controller, "memory.events" if self.version == "v2" else
                                    "memory.oom_control", "oom_kill"),
            refused_forks=self._counter(pids, "pids.events", "max"),
        )  # fmt: skip
        if self.version == "v1":
            for name in ("memory.max_usage_in_bytes", "memory.failcnt"):
                with contextlib.suppress(OSError):
                    (self.paths["memory"] / name).write_text("0")
            mark.peak_reset = True
        else:
            # Since Linux 6.12 a write resets memory.peak as seen through the same open file.
            with contextlib.suppress(OSError):
                mark.peak_file = open(self.paths[""] / "memory.peak", "r+b", buffering=0)  # noqa: SIM115
                mark.peak_file.write(b"reset")
                mark.peak_reset = True
        return mark

    def since(self, mark: Mark) -> tuple[float, bool, bool]:
        """(peak memory in MB, OOM-killed, hit the process limit) since the mark; the peak is 0 where it cannot
        be told apart from earlier commands'."""
        peak = 0.0
        if mark.peak_file is not None:
            with contextlib.suppress(OSError, ValueError):
                mark.peak_file.seek(0)
                peak = int(mark.peak_file.read().strip() or 0) / (1024 * 1024)
            mark.peak_file.close()
            mark.peak_file = None
        elif mark.peak_reset:
            peak = self.peak_memory_mb()
        pids = "" if self.version == "v2" else "pids"
        oom = self._counter(self.memory_controller, "memory.events" if self.version == "v2" else
                            "memory.oom_control", "oom_kill") > mark.oom_kills  # fmt: skip
        if self.version == "v1" and "oom_kill " not in self._read("memory", "memory.oom_control"):
            failcnt = self._read("memory", "memory.failcnt").strip()  # older kernels: the limit was hit
            oom = failcnt.isdigit() and int(failcnt) > 0
        refused = self._counter(pids, "pids.events", "max") > mark.refused_forks
        return peak, oom, refused

    def kill_all(self) -> None:
        controller = "" if self.version == "v2" else "pids"
        if self.version == "v2":
            with contextlib.suppress(OSError):
                (self.paths[""] / "cgroup.kill").write_text("1")
                return
        for _ in range(50):
            pids = [int(p) for p in self._read(controller, "cgroup.procs").split()]
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, 9)
            time.sleep(0.02)

    def remove(self) -> None:
        self.kill_all()
        for path in self.paths.values():
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
