"""The platform side of the agent protocol: JSON lines to and from a sandboxed agent process."""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import selectors
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from ..sandbox.process import HeadTail, is_running, kill_group, reap

MAX_LINE_BYTES = 8 * 1024 * 1024
#: How deeply a message may nest lists and objects (a real one nests a few levels): what is stored and recorded
#: of it is then never too deep for the code that reads it back.
MAX_NESTING = 64
MAX_PENDING_BYTES = 64 * 1024 * 1024  # written by the agent and not yet answered
STDERR_LOG_LIMIT = 10 * 1024 * 1024


class AgentExited(Exception):
    def __init__(self, exit_code: int | None) -> None:
        super().__init__(f"the agent process exited with code {exit_code}")
        self.exit_code = exit_code


class BadMessage(Exception):
    """A line from the agent that is not a protocol message; the message says what was expected."""

    def __init__(self, reason: str, line_preview: str = "") -> None:
        super().__init__(reason)
        self.line_preview = line_preview


def nesting_depth(value: object) -> int:
    """How deeply lists and objects nest in ``value`` (0 for a scalar), counted without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        todo.extend((child, depth + 1) for child in children)
    return deepest


class _NotANumber(ValueError):
    """A number JSON has no place for (NaN, Infinity, one too large for a float): the database refuses it."""


def _constant(name: str) -> float:
    raise _NotANumber(f"{name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotANumber(f"{text[:40]} is too large for a number")
    return value


def message_parse(line: bytes) -> dict:
    """One protocol message from one line, or ``BadMessage`` saying what is wrong with it: whatever the agent
    writes is the agent's, so nothing it writes may fail otherwise (a line nested deeper than the parser recurses
    is a bad message, not a crash of the runner). Every value must be one the database can store: NaN, Infinity
    and numbers past a float's range are refused here (NUL and lone surrogates in strings are replaced where they
    are stored: ``text.db_json``)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise BadMessage("the line is not UTF-8 text") from None
    try:
        message = json.loads(text, parse_constant=_constant, parse_float=_float)
    except json.JSONDecodeError as exc:
        raise BadMessage(f"the line is not valid JSON ({exc.msg} at column {exc.colno})") from None
    except _NotANumber as exc:
        raise BadMessage(f"the line is not valid JSON: {exc}; write a finite number, or a string") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise BadMessage(f"the line is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadMessage(f"the line nests lists or objects deeper than {MAX_NESTING} levels") from None
    if nesting_depth(message) > MAX_NESTING:
        raise BadMessage(f"the line nests lists or objects deeper than {MAX_NESTING} levels")
    if not isinstance(message, dict):
        raise BadMessage(f"the line is JSON but not an object (got {type(message).__name__})")
    kind = message.get("type")
    if kind not in ("act", "low", "llm"):
        raise BadMessage(f'unknown message type {kind!r}; expected "act", "low" or "llm"')
    if kind in ("act", "low") and not isinstance(message.get("action"), str):
        raise BadMessage(f'an "{kind}" message needs "action": the name of an action')
    if kind == "act":
        if "entries" in message and not isinstance(message["entries"], dict):
            raise BadMessage('"entries" must be an object such as {"Thought": "..."}')
        if "observation" in message and not isinstance(message["observation"], str):
            raise BadMessage('"observation" must be a string: what the action made')
    if kind == "llm" and not isinstance(message.get("messages"), list):
        raise BadMessage('an "llm" message needs "messages": a list of {"role": ..., "content": ...}')
    return message


class AgentChannel:
    def __init__(self, proc: subprocess.Popen, stderr_log: Path) -> None:
        """Talk to a started agent process. When the channel cannot be built (a process without pipes, a log that
        cannot be opened), the process is killed before the error goes on: nobody else holds it."""
        self.proc = proc
        try:
            self._open(stderr_log)
        except BaseException:
            kill_group(proc)
            reap(proc)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                with contextlib.suppress(Exception):
                    stream.close()
            raise

    def _open(self, stderr_log: Path) -> None:
        proc = self.proc
        self.stdout_fd = proc.stdout.fileno()
        self.stderr_fd = proc.stderr.fileno()
        os.set_blocking(self.stdout_fd, False)
        os.set_blocking(self.stderr_fd, False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.stdout_fd, selectors.EVENT_READ)
        self.selector.register(self.stderr_fd, selectors.EVENT_READ)
        self.stdin_fd = proc.stdin.fileno()
        os.set_blocking(self.stdin_fd, False)
        self.buffer = bytearray()
        self.skipping_long_line = False
        self.stderr_tail = HeadTail(8192)
        self.stderr_log = open(stderr_log, "ab")  # noqa: SIM115 - closed in close()
        self.stderr_logged = 0
        self.exit_code: int | None = None
        self.cpu_seconds = 0.0
        self.max_rss_mb = 0.0

    def send(self, message: dict, *, tick: Callable[[], None] | None = None) -> None:
        """Write one line to the agent without ever blocking on it: while its stdin is full (an agent that
        does not read), keep reading what it writes and keep ticking (heartbeat, cancel, time limit)."""
        view = memoryview((json.dumps(message) + "\n").encode())
        while view:
            try:
                view = view[os.write(self.stdin_fd, view) :]
            except BlockingIOError:
                select.select([self.stdout_fd, self.stderr_fd], [self.stdin_fd], [], 0.5)
                self._read_available()
                if tick is not None:
                    tick()
            except (BrokenPipeError, ValueError, OSError):
                return  # the agent has gone; receive() reports how it ended

    def _stderr(self, data: bytes) -> None:
        self.stderr_tail.write(data)
        if self.stderr_logged < STDERR_LOG_LIMIT:
            chunk = data[: STDERR_LOG_LIMIT - self.stderr_logged]
            self.stderr_log.write(chunk)
            self.stderr_log.flush()
            self.stderr_logged += len(chunk)

    def _take(self, fd: int, data: bytes) -> None:
        """What the agent wrote: stdout is buffered as messages (bounded), stderr goes to its log."""
        if fd == self.stdout_fd:
            self.buffer += data
            if len(self.buffer) > MAX_PENDING_BYTES:
                raise AgentExited(self.finish())
        else:
            self._stderr(data)

    def _read_available(self) -> None:
        """Take what the agent has written so far (used while a send waits for it to read)."""
        for fd in (self.stdout_fd, self.stderr_fd):
            try:
                data = os.read(fd, 65536)
            except (BlockingIOError, OSError):
                continue
            self._take(fd, data)

    def _pop_line(self) -> bytes | None:
        newline = self.buffer.find(b"\n")
        if self.skipping_long_line:  # the rest of a line already reported as too long: dropped, not re-reported
            if newline < 0:
                self.buffer.clear()
                return None
            del self.buffer[: newline + 1]
            self.skipping_long_line = False
            newline = self.buffer.find(b"\n")
        if newline >= 0:
            line = bytes(self.buffer[:newline])
            del self.buffer[: newline + 1]
            return line
        if len(self.buffer) > MAX_LINE_BYTES:
            self.buffer.clear()
            self.skipping_long_line = True
            raise BadMessage(f"a line longer than {MAX_LINE_BYTES} bytes without a newline")
        return None

    def receive(self, *, tick: Callable[[], None], tick_every: float = 0.5) -> dict:
        """The next message. Raises BadMessage for garbage, AgentExited when the process is gone."""
        while True:
            line = self._pop_line()
            if line is not None:
                if not line.strip():
                    continue
                try:
                    return message_parse(line)
                except BadMessage as exc:
                    exc.line_preview = line[:500].decode("utf-8", errors="replace")
                    raise
            if not self.selector.get_map():
                raise AgentExited(self.finish())
            for key, _ in self.selector.select(timeout=tick_every):
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    self.selector.unregister(key.fd)
                    continue
                self._take(key.fd, data)
            tick()

    def finish(self, grace_s: float = 0.0) -> int | None:
        """Wait up to grace_s for the agent to exit, then kill it; returns its exit code."""
        if self.exit_code is not None:
            return self.exit_code
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and is_running(self.proc):
            self._drain_stderr()
            time.sleep(0.05)
        self._drain_stderr()
        kill_group(self.proc)
        info = reap(self.proc)
        self.exit_code, self.cpu_seconds, self.max_rss_mb = info.code, info.cpu_seconds, info.max_rss_mb
        return self.exit_code

    def _drain_stderr(self) -> None:
        try:
            while data := os.read(self.stderr_fd, 65536):
                self._stderr(data)
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        self.finish()
        self.selector.close()
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()
        self.stderr_log.close()
