"""Wait for a sandboxed process while streaming its output, bounding what is kept, and killing on demand."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass


class HeadTail:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts what was cut between them."""

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        half = self.limit // 2
        room = half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > half:
                del self.tail[: len(self.tail) - half]

    @property
    def cut(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if self.cut:
            return f"{head}\n[... {self.cut} bytes of output cut here; the start and the end are kept ...]\n{tail}"
        return head + tail


class Interrupted(Exception):
    """Raised by a tick callback to stop the process (cancel, run limit); carries the reason."""


@dataclass
class ProcessResult:
    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    cpu_seconds: float
    max_rss_mb: float
    timed_out: bool = False
    output_bytes: int = 0
    oom_killed: bool = False
    hit_process_limit: bool = False
    stopped_reason: str = ""

    @property
    def killed_by_signal(self) -> int | None:
        return -self.exit_code if self.exit_code is not None and self.exit_code < 0 else None


def is_running(proc: subprocess.Popen) -> bool:
    """True while the process has not exited (checked without reaping it, so its rusage is kept)."""
    if hasattr(proc, "reap_exit"):  # a process of another backend (docker) knows itself
        return proc.is_running()
    if getattr(proc, "exit_info", None) is not None:
        return False
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        return False


def kill_group(proc: subprocess.Popen) -> None:
    if hasattr(proc, "kill_all"):
        proc.kill_all()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


@dataclass
class Exit:
    code: int | None
    cpu_seconds: float = 0.0
    max_rss_mb: float = 0.0
    oom_killed: bool = False
    hit_process_limit: bool = False


def reap(proc: subprocess.Popen) -> Exit:
    """Wait for proc and release its cgroup; its exit code, resource use, and which limit (if any) it hit."""
    existing = getattr(proc, "exit_info", None)
    if existing is not None:
        return existing
    if hasattr(proc, "reap_exit"):
        return proc.reap_exit()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        info = Exit(proc.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)
    except ChildProcessError:
        info = Exit(proc.wait())
    cgroup = getattr(proc, "cgroup", None)
    if cgroup is not None:
        info.max_rss_mb = max(info.max_rss_mb, cgroup.peak_memory_mb())
        info.oom_killed = cgroup.oom_killed()
        info.hit_process_limit = cgroup.pids_limited()
        cgroup.remove()
    proc.exit_info = info
    return info


def run_process(
    proc: subprocess.Popen,
    *,
    timeout: float | None,
    keep_bytes: int = 20_000,
    on_output: Callable[[str, bytes], None] | None = None,
    tick: Callable[[], None] | None = None,
    tick_every: float = 1.0,
    check: Callable[[], str] | None = None,
) -> ProcessResult:
    """Read stdout/stderr as they come until the process exits. ``tick`` may raise Interrupted (the process is
    killed and the exception goes on); ``check`` may return a reason to stop the process (e.g. a limit)."""
    started = time.monotonic()
    buffers = {"stdout": HeadTail(keep_bytes), "stderr": HeadTail(keep_bytes)}
    selector = selectors.DefaultSelector()
    for name in ("stdout", "stderr"):
        stream = getattr(proc, name)
        if stream is not None:
            os.set_blocking(stream.fileno(), False)
            selector.register(stream, selectors.EVENT_READ, name)
    timed_out = False
    stopped = ""
    last_tick = started
    try:
        while selector.get_map():
            now = time.monotonic()
            if timeout is not None and now - started > timeout:
                timed_out = True
                kill_group(proc)
                break
            for key, _ in selector.select(timeout=min(tick_every, 0.5)):
                try:
                    data = os.read(key.fileobj.fileno(), 65536)
                except BlockingIOError:
                    continue
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                buffers[key.data].write(data)
                if on_output is not None:
                    on_output(key.data, data)
            if time.monotonic() - last_tick >= tick_every:
                last_tick = time.monotonic()
                if tick is not None:
                    tick()
                if check is not None and (stopped := check()):
                    kill_group(proc)
                    break
    except BaseException:
        kill_group(proc)
        reap(proc)
        raise
    finally:
        selector.close()
        for name in ("stdout", "stderr"):
            stream = getattr(proc, name)
            if stream is not None:
                stream.close()
    # Pipes closed: the process (or what it left running) is done with its output. Make sure nothing lingers.
    kill_group(proc)
    info = reap(proc)
    return ProcessResult(
        exit_code=info.code,
        stdout=buffers["stdout"].text(),
        stderr=buffers["stderr"].text(),
        duration_s=time.monotonic() - started,
        cpu_seconds=info.cpu_seconds,
        max_rss_mb=info.max_rss_mb,
        timed_out=timed_out,
        output_bytes=buffers["stdout"].total + buffers["stderr"].total,
        oom_killed=info.oom_killed,
        hit_process_limit=info.hit_process_limit,
        stopped_reason=stopped,
    )
