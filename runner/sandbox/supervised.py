"""A sandbox kept for a whole run: started once, it runs each script through the supervisor inside it (see
``supervisor.py``) instead of starting a new sandbox per action.

Isolation is the sandbox's own (same mounts, no network, same user, no capabilities, the same cgroup limits);
what one command started never outlives it (the supervisor kills everything but itself after each command). A
command is a process to the runner: ``SupervisedProcess`` has the stdout/stderr pipes ``run_process`` reads, and
``kill_all`` / ``reap_exit`` / ``is_running`` like the docker backend's. A supervisor that died or stopped
answering is a ``SupervisorLost`` for the action it was running, and the next command starts a new sandbox.

Only bwrap keeps one (``BENCH_SANDBOX_PERSISTENT``, on by default), and only for Execute Script: the Python REPL
keeps a sandbox of its own (its interpreter outlives a command), and docker, ``local`` and bwrap with
``BENCH_SANDBOX_PERSISTENT=0`` start one sandbox per process. A kept sandbox is started with the same mounts,
network, user, capabilities and cgroup as a per-script one, its process limit one higher (for the supervisor). The
script is not PID 1 of its sandbox here, so SIGXCPU reaches it at its CPU limit; in a sandbox of its own (bwrap's
``--as-pid-1``) it is PID 1, which ignores SIGXCPU, and is stopped by SIGKILL at the hard limit, 5 s later.
``Environment.close`` ends the kept sandbox: at the end of the conversation, a hand-back, any end of the run.

The session launches it once the agent's process is started (``launch``, through ``RunSession.agent_started`` and
``Environment.kept_sandbox_launch``), with the mounts the first script would have had (the workspace is laid out
and mounted by then, and nothing of the run changes its mounts after that): bwrap and the supervisor come up while
the agent starts and makes its first model call, and the first command waits only for what is left of that start
(no thread: the supervisor's first answer waits on its socket until the first command reads it). A run whose agent
runs no script ends it like any other, with the environment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import select
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from .base import Limits, Mount, Sandbox, SandboxError
from .process import Exit, kill_group

log = logging.getLogger(__name__)

SOURCE = (Path(__file__).parent / "supervisor.py").read_text()
START_TIMEOUT_S = 30.0
GRACE_S = 10.0  # for an answer once the command is over or was told to stop
MAX_MESSAGE = 1 << 20


def _readable(sock: socket.socket, timeout: float) -> bool:
    """Whether the socket has a message (or was closed) within timeout seconds (poll: any fd number)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


class SupervisorLost(SandboxError):
    """The sandbox's supervisor died or stopped answering during a command; the sandbox was ended."""


class SupervisedSandbox:
    """The run's workspace sandbox with its supervisor, launched ahead or started on the first command, and again
    after a loss."""

    def __init__(self, backend: Sandbox, *, mounts: Sequence[Mount], limits: Limits) -> None:
        self.backend = backend
        self.mounts = list(mounts)
        self.limits = limits
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.busy: SupervisedProcess | None = None
        self.ready = False  # the supervisor has said it is ready (``start`` waits for it; ``launch`` does not)

    # -- the sandbox -----------------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def launch(self) -> None:
        """Start the sandbox now and do not wait for it: its supervisor comes up while the worker does other work
        (the session launches it as the agent starts), and the first command finds it ready (``popen`` takes its
        first answer then). A sandbox that cannot be launched, or whose supervisor does not come up, is started
        by the first command, as it would have been without the launch: only that start's failure is the
        command's."""
        if self.proc is not None:
            return
        try:
            self._spawn()
        except SandboxError as exc:
            log.warning("the sandbox kept for the run could not be started ahead; its first command starts it: %s", exc)

    def start(self) -> None:
        """Start the sandbox and wait until its supervisor is ready."""
        self._spawn()
        self._ready_wait()

    def _spawn(self) -> None:
        """Start bwrap with the supervisor as its first process; it says it is ready on the socket."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # The supervisor is one more process beside the commands: the process limit makes room for it.
            limits = dataclasses.replace(
                self.limits, cpu_seconds=None, processes=self.limits.processes and self.limits.processes + 1
            )
            argv = [self.backend.python, "-I", "-S", "-c", SOURCE, str(theirs.fileno())]
            self.proc = self.backend.popen(
                argv,
                mounts=self.mounts,
                cwd="/",
                limits=limits,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(theirs.fileno(),),
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock = ours
        self.ready = False

    def _ready_wait(self) -> None:
        """The supervisor's first answer, that it runs as the sandbox's first process; SandboxError (the sandbox
        ended) when it does not come."""
        try:
            answer = self._answer(time.monotonic() + START_TIMEOUT_S)
        except SupervisorLost as exc:
            self.close()
            raise SandboxError(f"the sandbox did not start: {exc}") from None
        if answer.get("ready") != 1:
            self.close()
            raise SandboxError(f"the sandbox's supervisor did not start as its first process: {answer}")
        self.ready = True

    def close(self) -> None:
        """End the sandbox: everything in it is killed (from outside: nothing inside has to cooperate)."""
        self.ready = False
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            kill_group(self.proc)
            cgroup = getattr(self.proc, "cgroup", None)
            if cgroup is not None:
                cgroup.kill_all()
            with contextlib.suppress(ChildProcessError):
                self.proc.wait()
            if cgroup is not None:
                cgroup.remove()
            if self.proc.stderr is not None:
                self.proc.stderr.close()
            self.proc = None

    def __del__(self) -> None:
        # An environment dropped without close (a test's): the sandbox and its cgroup go with it.
        with contextlib.suppress(Exception):
            self.close()

    def _why_lost(self) -> str:
        """What the supervisor said when it died (its stderr), for the error."""
        if self.proc is None or self.proc.stderr is None:
            return ""
        with contextlib.suppress(OSError):
            os.set_blocking(self.proc.stderr.fileno(), False)
            text = (self.proc.stderr.read(4000) or b"").decode(errors="replace").strip()
            return f": {text}" if text else ""
        return ""

    def _answer(self, deadline: float) -> dict:
        """The supervisor's next message; SupervisorLost when it gives none in time (the caller ends the sandbox)."""
        sock = self.sock
        if sock is None:
            raise SupervisorLost("the sandbox had already ended")
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SupervisorLost("the sandbox's supervisor did not answer in time and was stopped")
            if not _readable(sock, left):
                continue
            try:
                data = sock.recv(MAX_MESSAGE)
            except ConnectionResetError:  # the supervisor left a message unread: its answer may still be queued
                try:
                    data = sock.recv(MAX_MESSAGE, socket.MSG_DONTWAIT)
                except OSError:
                    data = b""
            except OSError:
                data = b""
            if not data:
                raise SupervisorLost(f"the sandbox's supervisor stopped{self._why_lost()}")
            return json.loads(data)

    # -- commands --------------------------------------------------------------------------------------------
    def popen(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: dict[str, str] | None,
        limits: Limits,
        timeout: float | None = None,
    ) -> SupervisedProcess:
        """Start argv in the sandbox (started first if it is not running) and return it as a process. The caller
        enforces ``timeout`` (it kills the process); the supervisor kills a little after it on its own, in case."""
        if self.busy is not None:
            self.close()  # a command whose end was never collected: nothing of it may meet the next one
            self.busy = None
        if self.proc is not None and not self.ready:  # launched ahead (``launch``): its supervisor's first answer
            try:
                self._ready_wait()
            except SandboxError as exc:
                log.warning("the sandbox started ahead for the run did not come up; starting it again: %s", exc)
        if not self.alive:
            self.close()
            self.start()
        full_env = self.backend.environment(env, str(Path(self.backend.python).parent))
        full_env |= self.backend.gpu_env(limits.gpus)
        cgroup = getattr(self.proc, "cgroup", None)
        request = {
            "op": "run",
            "argv": list(argv),
            "cwd": cwd,
            "env": full_env,
            "rlimits": limits.rlimits(cgroup=cgroup is not None, extra_processes=1),
            "timeout": timeout,
        }
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        mark = cgroup.mark() if cgroup is not None else None
        try:
            socket.send_fds(self.sock, [json.dumps(request).encode()], [out_w, err_w])
        except OSError as exc:
            os.close(out_r)
            os.close(err_r)
            why = self._why_lost()
            self.close()
            raise SupervisorLost(f"the sandbox's supervisor could not take the command ({exc}){why}") from None
        finally:
            os.close(out_w)  # the supervisor has its own copies: the pipes close when the command is done
            os.close(err_w)
        self.busy = SupervisedProcess(self, out_r, err_r, mark)
        return self.busy


class SupervisedProcess:
    """One command in a supervised sandbox, as the runner sees a process."""

    pid = -1
    stdin = None

    def __init__(self, box: SupervisedSandbox, out_fd: int, err_fd: int, mark: object) -> None:
        self.box = box
        self.stdout = os.fdopen(out_fd, "rb", buffering=0)
        self.stderr = os.fdopen(err_fd, "rb", buffering=0)
        self.mark = mark
        self.killed = False
        self.exit_info: Exit | None = None
        self.returncode: int | None = None

    def kill_all(self) -> None:
        """Ask the supervisor to kill the command and all it started (once; the answer comes to reap_exit)."""
        if self.killed or self.exit_info is not None or self.box.sock is None:
            return
        self.killed = True
        with contextlib.suppress(OSError):
            self.box.sock.send(b'{"op": "kill"}')

    def is_running(self) -> bool:
        if self.exit_info is not None or self.box.sock is None:
            return False
        return not _readable(self.box.sock, 0)

    def reap_exit(self) -> Exit:
        if self.exit_info is not None:
            return self.exit_info
        self.kill_all()  # the runner asks once its pipes are closed: whatever is left of the command goes
        cgroup = getattr(self.box.proc, "cgroup", None)
        try:
            answer = self.box._answer(time.monotonic() + GRACE_S)
        except SupervisorLost:
            oom = cgroup is not None and self.mark is not None and cgroup.since(self.mark)[1]
            self.box.close()
            if not oom:
                raise
            # The kernel's OOM killer took the supervisor with the command: the memory limit, as reported today.
            self.exit_info = Exit(-9, oom_killed=True)
            self.returncode = -9
            return self.exit_info
        finally:
            self.box.busy = None
        if "error" in answer:
            self.box.close()
            raise SupervisorLost(f"the sandbox could not run the command: {answer['error']}")
        info = Exit(int(answer["exit"]), float(answer["cpu"]), float(answer["rss_kb"]) / 1024)
        if cgroup is not None and self.mark is not None:
            peak, info.oom_killed, info.hit_process_limit = cgroup.since(self.mark)
            info.max_rss_mb = max(info.max_rss_mb, peak)
        if answer.get("retire"):
            self.box.close()  # the script left the sandbox changed: the next one gets a new sandbox
        self.exit_info = info
        self.returncode = info.code
        return info
