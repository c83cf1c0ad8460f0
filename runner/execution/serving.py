"""Serving a submission its requests, from the worker, between the two rooms of an evaluation.

A served task (``[evaluation] serve`` in task.toml) is scored in three steps: eval.py makes the requests beside the
hidden files, the submission answers them in the workspace's sandbox (``runner/harness/serve.py``, where no hidden
file is), and eval.py scores the answers beside the hidden files again. This module is the middle step's other end:
it sends each request only once the answer before it has arrived, and times each from the first byte sent to the
last byte of its answer received. The submission's process can touch neither the clock nor the answers once sent,
and it sees each request only when it is timed, so nothing can be computed in advance or deferred past the answer.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import struct
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..sandbox.process import HeadTail, kill_group, reap

HEADER = struct.Struct(">Q")
#: The largest answer a submission may give to one request.
ANSWER_LIMIT = 256 * 1024 * 1024
#: The most all of its answers may hold together (they are kept on the worker's disk until they are scored).
ANSWERS_LIMIT = 1024 * 1024 * 1024
#: How long a process that has answered everything may take to exit before it is killed.
EXIT_GRACE_S = 5.0


class ServeFailed(Exception):
    """The submission did not answer: the message says how (it exited, timed out, answered too much)."""


@dataclass
class Served:
    #: Seconds per request, measured here; as many as there were answers.
    seconds: list[float] = field(default_factory=list)
    error: str = ""
    log: str = ""


class _Channel:
    """The process's stdin, stdout and stderr, pumped by one selector: writes go out as the pipe takes them,
    stdout is parsed into frames, stderr is kept head and tail."""

    def __init__(self, proc: subprocess.Popen, *, deadline: float, tick: Callable[[], None] | None) -> None:
        self.proc = proc
        self.deadline = deadline
        self.tick = tick
        self.last_tick = time.monotonic()
        self.selector = selectors.DefaultSelector()
        self.stderr = HeadTail(8000)
        self.inbox = bytearray()
        self.stdout_open = True
        self.writing = False
        for stream, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
            os.set_blocking(stream.fileno(), False)
            self.selector.register(stream, selectors.EVENT_READ, name)
        os.set_blocking(proc.stdin.fileno(), False)

    def pump(self, outgoing: memoryview | None) -> memoryview | None:
        """One turn: write what the stdin pipe takes of ``outgoing`` and read what has come; what is left to write."""
        now = time.monotonic()
        if now > self.deadline:
            raise ServeFailed("timeout")
        if self.tick is not None and now - self.last_tick >= 1.0:
            self.last_tick = now
            self.tick()
        if outgoing is not None and len(outgoing) and not self.writing:
            self.selector.register(self.proc.stdin, selectors.EVENT_WRITE, "stdin")
            self.writing = True
        for key, _ in self.selector.select(timeout=min(0.5, max(0.0, self.deadline - now))):
            if key.data == "stdin":
                try:
                    outgoing = outgoing[os.write(key.fd, outgoing) :]
                except BlockingIOError:
                    continue
                except BrokenPipeError:
                    raise ServeFailed("exited") from None
                if not len(outgoing):
                    self.selector.unregister(key.fileobj)
                    self.writing = False
                continue
            try:
                data = os.read(key.fd, 1 << 20)
            except BlockingIOError:
                continue
            if not data:
                self.selector.unregister(key.fileobj)
                if key.data == "stdout":
                    self.stdout_open = False
                continue
            if key.data == "stderr":
                self.stderr.write(data)
            else:
                self.inbox += data
                if len(self.inbox) >= HEADER.size and HEADER.unpack_from(self.inbox)[0] > ANSWER_LIMIT:
                    raise ServeFailed(f"an answer of more than {ANSWER_LIMIT} bytes")
        return outgoing

    def frame(self) -> bytes | None:
        """A whole frame from what has come, or None yet."""
        if len(self.inbox) < HEADER.size:
            return None
        size = HEADER.unpack_from(self.inbox)[0]
        if len(self.inbox) < HEADER.size + size:
            return None
        data = bytes(self.inbox[HEADER.size : HEADER.size + size])
        del self.inbox[: HEADER.size + size]
        return data

    def exchange(self, request: bytes | None) -> bytes:
        """Send ``request`` (None: only wait) and wait for the next frame."""
        outgoing = memoryview(HEADER.pack(len(request)) + request) if request is not None else None
        while True:
            outgoing = self.pump(outgoing)
            if (data := self.frame()) is not None:
                if outgoing is not None and len(outgoing):
                    raise ServeFailed("an answer before the whole request was read")
                return data
            if not self.stdout_open:
                raise ServeFailed("exited")

    def close(self) -> None:
        self.selector.close()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            stream.close()


def serve_requests(
    proc: subprocess.Popen,
    requests_dir: Path,
    count: int,
    answers_dir: Path,
    *,
    timeout_s: float,
    tick: Callable[[], None] | None = None,
) -> Served:
    """Send ``requests_dir``'s ``count`` requests to the serving process one by one and keep each answer in
    ``answers_dir`` (as ``000000``..., with ``seconds.json``). The process is ended on return."""
    channel = _Channel(proc, deadline=time.monotonic() + timeout_s, tick=tick)
    served = Served()
    phase = "loading (load())"
    kept = 0
    try:
        channel.exchange(None)
        for index in range(count):
            phase = f"answering request {index + 1} of {count}"
            request = (requests_dir / f"{index:06d}").read_bytes()
            started = time.perf_counter()
            answer = channel.exchange(request)
            served.seconds.append(time.perf_counter() - started)
            kept += len(answer)
            if kept > ANSWERS_LIMIT:
                raise ServeFailed(f"answers of more than {ANSWERS_LIMIT} bytes in all")
            (answers_dir / f"{index:06d}").write_bytes(answer)
        proc.stdin.close()
        channel.deadline = min(channel.deadline, time.monotonic() + EXIT_GRACE_S)
        with contextlib.suppress(ServeFailed):  # all answered: one slow to exit is killed below
            while channel.stdout_open:
                channel.pump(None)
    except ServeFailed as exc:
        served.error = _failure(exc, phase, timeout_s, proc)
    except BaseException:
        kill_group(proc)
        reap(proc)
        raise
    finally:
        (answers_dir / "seconds.json").write_text(json.dumps(served.seconds))
        kill_group(proc)
        channel.close()
    info = reap(proc)
    served.log = channel.stderr.text()
    if not served.error and len(served.seconds) == count and info.code not in (0, None, -9):
        served.log += f"\n(the serving process exited with {info.code} after its last answer)"
    if served.error and info.oom_killed:
        served.error += " (it ran out of memory)"
    return served


def _failure(exc: ServeFailed, phase: str, timeout_s: float, proc: subprocess.Popen) -> str:
    reason = str(exc)
    if reason == "timeout":
        return f"the submission did not finish within {timeout_s:.0f} s ({phase})"
    if reason == "exited":
        kill_group(proc)
        code = reap(proc).code
        return f"the submission's process exited with {code} while {phase}"
    return f"the submission gave {reason} while {phase}"
