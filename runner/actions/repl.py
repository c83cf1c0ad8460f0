"""Python REPL: one persistent interpreter per run, inside the workspace sandbox.

The interpreter runs a small server: it reads one JSON command per line, executes it in a namespace kept
between commands, and answers one JSON line with what the command printed. Output written straight to the
file descriptors (C extensions, subprocesses) arrives on stderr and is added to the answer.
"""

from __future__ import annotations

import dataclasses
import json
import os
import selectors
import subprocess
import time

from ..sandbox.process import HeadTail, Interrupted, is_running, kill_group, reap
from .code import workspace_guard
from .types import WORKSPACE, ActionEnv, ActionOutcome

SERVER = r"""
import contextlib, io, json, os, sys, traceback
channel = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
namespace = {"__name__": "__main__"}
for line in sys.stdin:
    command = json.loads(line)["command"]
    out = io.StringIO()
    error = False
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            try:
                code = compile(command, "<repl>", "eval")
            except SyntaxError:
                exec(compile(command, "<repl>", "exec"), namespace)
            else:
                value = eval(code, namespace)
                if value is not None:
                    print(repr(value))
        except BaseException as exc:
            error = True
            if isinstance(exc, SystemExit):
                print("SystemExit:", exc.code)
            else:
                lines = traceback.format_exception(exc)
                print("".join(lines[:1] + lines[2:]) if len(lines) > 2 else "".join(lines), end="")
    sys.stderr.flush()
    channel.write(json.dumps({"output": out.getvalue(), "error": error}) + "\n")
"""


MAX_ANSWER_BYTES = 16 * 1024 * 1024


class Repl:
    def __init__(self, env: ActionEnv) -> None:
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.buffer = bytearray()

    def start(self) -> None:
        self.proc = self.env.sandbox.popen(
            [self.env.python, "-u", "-c", SERVER],
            mounts=self.env.mounts(),
            cwd=WORKSPACE,
            env=self.env.sandbox_env(),
            # The interpreter lives across commands, so a CPU-time rlimit would add up over all of them: each
            # command is bounded by the action time limit instead.
            limits=dataclasses.replace(self.env.limits, cpu_seconds=None),
            stdin=subprocess.PIPE,
        )
        os.set_blocking(self.proc.stdin.fileno(), False)
        os.set_blocking(self.proc.stdout.fileno(), False)
        os.set_blocking(self.proc.stderr.fileno(), False)
        self.buffer.clear()

    def close(self) -> None:
        if self.proc is not None:
            kill_group(self.proc)
            reap(self.proc)
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                stream.close()
            self.proc = None

    def _stopped(self, message: str) -> ActionOutcome:
        self.close()
        return ActionOutcome(f"EnvError: {message}; the interpreter was stopped and its variables are gone.", True)

    def run(self, command: str) -> ActionOutcome:
        restarted = ""
        if self.proc is None or not is_running(self.proc):
            if self.proc is not None:
                restarted = "(The interpreter had stopped; a new one was started and earlier variables are gone.)\n"
                self.close()
            self.start()
        pending = memoryview((json.dumps({"command": command}) + "\n").encode())
        stdin = self.proc.stdin.fileno()
        raw = HeadTail(self.env.observation_limit)
        deadline = time.monotonic() + self.env.action_timeout_s
        guard = workspace_guard(self.env)
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ, "out")
        selector.register(self.proc.stderr, selectors.EVENT_READ, "err")
        last_tick = time.monotonic()
        try:
            while True:
                newline = self.buffer.find(b"\n")
                if newline >= 0:
                    try:
                        answer = json.loads(self.buffer[:newline])
                        output, error = str(answer["output"]), bool(answer["error"])
                    except (ValueError, KeyError, TypeError):
                        return self._stopped("the interpreter's answer was garbled (the command wrote on its channel)")
                    del self.buffer[: newline + 1]
                    return ActionOutcome(restarted + output + (raw.text() if raw.total else ""), error=error)
                if len(self.buffer) > MAX_ANSWER_BYTES:
                    return self._stopped(f"the command's answer grew over {MAX_ANSWER_BYTES} bytes")
                if time.monotonic() > deadline:
                    return self._stopped(f"the command did not finish within {self.env.action_timeout_s:.0f} s")
                if pending:  # the command is written without blocking: the interpreter may not be reading
                    try:
                        pending = pending[os.write(stdin, pending) :]
                    except BlockingIOError:
                        pass
                    except OSError:
                        return self._stopped("the interpreter could not take the command")
                for key, _ in selector.select(timeout=0.05 if pending else 0.5):
                    data = os.read(key.fileobj.fileno(), 65536)
                    if not data:
                        kill_group(self.proc)
                        info = reap(self.proc)
                        self.close()
                        why = ""
                        if info.oom_killed:
                            why = f": it used more than the memory limit of {self.env.limits.memory_mb} MB"
                        return ActionOutcome(
                            f"{raw.text()}EnvError: the Python interpreter exited{why}; its variables are gone "
                            "(the next command starts a new one).",
                            error=True,
                        )
                    if key.data == "out":
                        self.buffer += data
                    else:
                        raw.write(data)
                if time.monotonic() - last_tick >= 1.0:
                    last_tick = time.monotonic()
                    if self.env.tick is not None:
                        self.env.tick()
                    if limit := guard():
                        return self._stopped(f"the command was stopped {limit.removeprefix('it was stopped ')}")
        except Interrupted:
            self.close()
            raise
        finally:
            selector.close()
