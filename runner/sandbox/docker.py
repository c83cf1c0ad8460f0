"""The docker backend: each sandboxed process (the agent, a script, the REPL, an evaluation) runs in a fresh
container of the configured image, with no network, a read-only root, a size-limited /tmp, memory, CPU and
process limits, and GPUs by device request when the task asks for them. The agent's container lives for the
whole run; code actions get their own, so the agent never shares a container with the workspace.

The process looks like a subprocess to the rest of the runner: its stdout and stderr are OS pipes fed from the
container's attach socket by a thread that demultiplexes Docker's stream frames, and its stdin (when asked for) an
OS pipe that another thread copies into the socket, whose end closes the process's stdin (StdinOnce). Ended
containers are removed by a thread of their own, off the run's path; every container is labelled with the worker
process that owns it, so the ones nobody will remove are swept (after a create the client gave up on, and at a
worker's start).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import queue
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .base import Limits, Mount, Sandbox, SandboxError
from .config import SandboxConfig
from .process import Exit
from .seccomp import docker_profile

log = logging.getLogger(__name__)

FRAME_HEADER = struct.Struct(">BxxxL")  # stream type (1 stdout, 2 stderr), 3 zero bytes, payload length
#: Every container the backend makes carries these labels: what it is, which popen made it (found again when the
#: client gave up on its create) and which worker process owns it (swept when that process is dead).
KIND_LABEL = "mlab-bench"
SANDBOX_ID_LABEL = "mlab-bench.sandbox-id"
OWNER_LABEL = "mlab-bench.owner"


def _engine_error(exc: Exception, docker_host: str) -> SandboxError:
    host = os.environ.get("DOCKER_HOST") or docker_host or "the default socket"
    return SandboxError(
        f"the Docker engine at {host} is unreachable ({type(exc).__name__}: {exc}); start Docker or set "
        "BENCH_SANDBOX=bwrap"
    )


class StreamDemux(threading.Thread):
    """Reads Docker's multiplexed frames from a socket and writes each payload to the stdout or stderr pipe."""

    def __init__(self, sock: socket.socket, stdout_fd: int, stderr_fd: int) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.targets = {1: stdout_fd, 2: stderr_fd}

    def _read_exact(self, size: int) -> bytes | None:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                return None
            data += chunk
        return bytes(data)

    def run(self) -> None:
        try:
            while (header := self._read_exact(FRAME_HEADER.size)) is not None:
                kind, length = FRAME_HEADER.unpack(header)
                payload = self._read_exact(length)
                if payload is None:
                    break
                target = self.targets.get(kind)
                if target is not None:
                    with contextlib.suppress(BrokenPipeError):
                        os.write(target, payload)
        except OSError:
            pass
        finally:
            for fd in self.targets.values():
                with contextlib.suppress(OSError):
                    os.close(fd)


class StdinPump(threading.Thread):
    """The container's stdin, as a real pipe: what the runner writes to the pipe (non-blocking writes, a full pipe
    when the process does not read, EPIPE once it is gone) is copied to the attach socket. When the runner closes
    its end, the socket's write half is shut: with StdinOnce the engine then closes the process's stdin, which
    reads end of file, as from a pipe."""

    def __init__(self, read_fd: int, sock: socket.socket) -> None:
        super().__init__(daemon=True)
        self.read_fd = read_fd
        self.sock = sock

    def run(self) -> None:
        try:
            while data := os.read(self.read_fd, 65536):
                self.sock.sendall(data)
        except OSError:
            pass  # the container is gone: the runner's next write gets EPIPE
        finally:
            os.close(self.read_fd)
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)


class ContainerRemover:
    """Removes ended containers in a thread of its own, so that removing one (seconds on a slow storage driver) is
    never on a run's critical path. A container whose removal a worker's exit interrupts is still labelled with
    its owner, and swept when a worker next starts (``containers_sweep``)."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def remove(self, container: Any) -> None:
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._work, name="docker-remover", daemon=True)
                self.thread.start()
        self.queue.put(container)

    def _work(self) -> None:
        while True:
            container = self.queue.get()
            try:
                container.remove(force=True)
            except Exception as exc:  # noqa: BLE001 - gone already, or the engine went away: the sweep gets it
                log.debug("could not remove container %s: %s", getattr(container, "id", "?"), exc)

    def drain(self, timeout: float = 60.0) -> bool:
        """Wait until every container handed over so far is removed (tests, a worker's shutdown)."""
        done = threading.Event()
        self.remove(_Marker(done))
        return done.wait(timeout)


class _Marker:
    def __init__(self, done: threading.Event) -> None:
        self.done = done

    def remove(self, force: bool = False) -> None:
        self.done.set()


REMOVER = ContainerRemover()


def process_start_ticks(pid: int) -> str:
    """When a process started (clock ticks since boot), '' when there is no such process: with the pid, it names
    one process across pid reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def owner_token() -> str:
    """This process, as a container's owner: host, pid and start time."""
    return f"{socket.gethostname()}/{os.getpid()}/{process_start_ticks(os.getpid())}"


def owner_alive(token: str) -> bool | None:
    """Whether the process a token names is alive; None when it is on another host (nothing can be said)."""
    host, _, rest = token.partition("/")
    pid, _, ticks = rest.partition("/")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    return process_start_ticks(int(pid)) == ticks != ""


def containers_sweep(client: Any, *, sandbox_id: str = "") -> int:
    """Remove the sandbox containers nobody will remove: those whose owner (a worker process on this host) is
    dead, or those of one popen (``sandbox_id``) whose create failed on the client. Returns how many went."""
    filters = {"label": [f"{SANDBOX_ID_LABEL}={sandbox_id}"] if sandbox_id else [f"{KIND_LABEL}=sandbox"]}
    removed = 0
    for container in client.containers.list(all=True, filters=filters, ignore_removed=True):
        owner = container.labels.get(OWNER_LABEL, "")
        if not sandbox_id and owner and owner_alive(owner) is not False:
            continue  # a live worker's, or another host's
        try:
            container.remove(force=True)
            removed += 1
        except Exception as exc:  # noqa: BLE001 - removed meanwhile by someone else
            log.debug("could not remove container %s: %s", container.id, exc)
    return removed


def sweep_after_failed_create(client: Any, sandbox_id: str, *, within_s: float) -> threading.Thread:
    """A create the client gave up on may still be carried out by the engine: look for the container by its label,
    now and for ``within_s`` seconds more, and remove it when it appears."""

    def sweep() -> None:
        deadline = time.monotonic() + within_s
        while True:
            try:
                if containers_sweep(client, sandbox_id=sandbox_id):
                    return
            except Exception as exc:  # noqa: BLE001 - the engine is unreachable now; try again
                log.debug("sweep of %s failed: %s", sandbox_id, exc)
            if time.monotonic() >= deadline:
                return
            time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))

    thread = threading.Thread(target=sweep, name=f"docker-sweep-{sandbox_id[:8]}", daemon=True)
    thread.start()
    return thread


class DockerProcess:
    """A container run as a process: OS pipes for its streams, and kill / reap / is_running for the runner."""

    def __init__(self, container: Any, sock: socket.socket, *, stdin: bool) -> None:
        self.container = container
        self.sock = sock
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.stdout = os.fdopen(out_r, "rb", buffering=0)
        self.stderr = os.fdopen(err_r, "rb", buffering=0)
        self.stdin = None
        if stdin:
            in_r, in_w = os.pipe()
            self.stdin = os.fdopen(in_w, "wb", buffering=0)
            StdinPump(in_r, sock).start()
        self.demux = StreamDemux(sock, out_w, err_w)
        self.demux.start()
        self.exit_info: Exit | None = None
        self.pid = -1
        self.returncode: int | None = None

    def kill_all(self) -> None:
        with contextlib.suppress(Exception):
            self.container.kill()

    def is_running(self) -> bool:
        if self.exit_info is not None:
            return False
        with contextlib.suppress(Exception):
            self.container.reload()
            return self.container.status in ("created", "running")
        return False

    def reap_exit(self) -> Exit:
        if self.exit_info is None:
            try:
                status = self.container.wait()
                self.container.reload()
                state = self.container.attrs.get("State", {})
                self.exit_info = Exit(int(status.get("StatusCode", -1)), oom_killed=bool(state.get("OOMKilled")))
            except Exception as exc:  # noqa: BLE001 - the engine went away; report as a failed process
                self.exit_info = Exit(-1)
                self.exit_info.error = str(exc)
            finally:
                REMOVER.remove(self.container)
                with contextlib.suppress(OSError):
                    self.sock.close()
            self.returncode = self.exit_info.code
        return self.exit_info


class DockerSandbox(Sandbox):
    name = "docker"
    passes_fds = False

    @property
    def protects_links(self) -> bool:
        user = self.user.split(":")[0]
        return bool(user) and user not in ("0", "root")

    def __init__(self, client: Any, image: str, *, config: SandboxConfig | None = None) -> None:
        config = config or SandboxConfig(kind="docker")
        self.client = client
        self.image = image
        self.user = config.docker_user
        self.docker_host = config.docker_host
        self.timeout_s = config.docker_timeout_s
        self.python = config.interpreter
        self.ids = docker_ids(config.docker_user) if config.ids is not None else None

    @classmethod
    def connect(cls, config: SandboxConfig) -> DockerSandbox:
        """A sandbox on the configured engine; SandboxError when the engine cannot be reached."""
        return cls(docker_client(config), config.docker_image, config=config)

    def container_spec(
        self,
        argv: Sequence[str],
        *,
        mounts: Sequence[Mount],
        cwd: str,
        env: dict[str, str],
        limits: Limits,
        network: bool,
        stdin: bool = False,
        sandbox_id: str = "",
    ) -> dict:
        from docker.types import DeviceRequest, Ulimit
        from docker.types import Mount as DockerMount

        ulimits = [Ulimit(name="core", soft=0, hard=0)]
        if limits.file_size_mb:
            size = limits.file_size_mb * 1024 * 1024
            ulimits.append(Ulimit(name="fsize", soft=size, hard=size))
        if limits.open_files:
            ulimits.append(Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files))
        if limits.cpu_seconds:
            # SIGXCPU at the limit (a message the script can show), SIGKILL 5 s later, as the other backends.
            ulimits.append(Ulimit(name="cpu", soft=limits.cpu_seconds, hard=limits.cpu_seconds + 5))
        spec = {
            "image": self.image,
            "command": list(argv),
            "working_dir": cwd,
            "environment": env,
            "network_mode": "bridge" if network else "none",
            "mounts": [
                DockerMount(
                    target=m.target,
                    source="/dev/null" if m.hide else str(m.source),
                    type="bind",
                    read_only=m.hide != "" or not m.writable,
                )
                for m in mounts
                if m.hide != "folder"
            ],
            "read_only": True,
            "tmpfs": {
                "/tmp": f"size={limits.tmp_mb}m",
                **{m.target: "ro,size=4k" for m in mounts if m.hide == "folder"},
            },
            "cap_drop": ["ALL"],
            # The bwrap sandbox's system call policy, as a profile (seccomp.py): stricter than the engine's default.
            "security_opt": ["no-new-privileges", f"seccomp={_seccomp_profile()}"],
            "ulimits": ulimits,
            "pids_limit": limits.processes or -1,
            # An init as PID 1 (the engine's docker-init): the command is not PID 1, so the signals the kernel
            # sends it (SIGXCPU, SIGXFSZ) are not ignored as they are for an init, and its children are reaped.
            "init": True,
            # Not detached: the create asks to attach stdout and stderr and, with stdin, StdinOnce, so that
            # closing the attach socket's write half closes the process's stdin.
            "detach": False,
            "stdin_open": stdin,
            "labels": {KIND_LABEL: "sandbox", SANDBOX_ID_LABEL: sandbox_id, OWNER_LABEL: owner_token()},
        }
        if limits.memory_mb:
            spec["mem_limit"] = f"{limits.memory_mb}m"
            spec["memswap_limit"] = f"{limits.memory_mb}m"
        if limits.cpus:
            spec["nano_cpus"] = int(limits.cpus * 1e9)
        if limits.gpus:
            spec["device_requests"] = [DeviceRequest(count=limits.gpus, capabilities=[["gpu"]])]
        if self.user:
            spec["user"] = self.user
        return spec

    def popen(
        self,
        argv: Sequence[str],
        *,
        mounts: Sequence[Mount],
        cwd: str,
        env: dict[str, str] | None = None,
        limits: Limits | None = None,
        network: bool = False,
        stdin: int | None = None,
        stdout: int | None = None,
        stderr: int | None = None,
        pass_fds: Sequence[int] = (),
    ) -> DockerProcess:
        """Create, attach and start a container. stdin=subprocess.PIPE gives the process a pipe to write to;
        anything else gives it none (it reads end of file). A failure at any point leaves no container behind."""
        if pass_fds:
            raise SandboxError("the docker sandbox cannot hand file descriptors to a container")
        piped = stdin == subprocess.PIPE
        sandbox_id = uuid.uuid4().hex
        full_env = self.environment(env, "/usr/local/bin")
        spec = self.container_spec(
            argv,
            mounts=mounts,
            cwd=cwd,
            env=full_env,
            limits=limits or Limits(),
            network=network,
            stdin=piped,
            sandbox_id=sandbox_id,
        )
        try:
            container = self.client.containers.create(**spec)
        except Exception as exc:  # noqa: BLE001 - every engine failure is a SandboxError for the run
            # The client may have given up on an engine that still makes the container: it is looked for by its
            # label and removed when it appears.
            sweep_after_failed_create(self.client, sandbox_id, within_s=2 * self.timeout_s)
            raise SandboxError(f"could not create a container of {self.image}: {exc}") from exc
        try:
            sock = container.attach_socket(
                params={"stdin": int(piped), "stdout": 1, "stderr": 1, "stream": 1, "logs": 0}
            )
            raw = getattr(sock, "_sock", sock)  # read without a timeout (docker-py asks for none on attach)
            container.start()
        except Exception as exc:  # noqa: BLE001
            with contextlib.suppress(Exception):
                container.remove(force=True)
            raise SandboxError(f"could not start a container of {self.image}: {exc}") from exc
        return DockerProcess(container, raw, stdin=piped)


def docker_ids(user: str) -> tuple[int, int] | None:
    """(uid, gid) of a numeric container user "UID:GID" (the workspace is laid out for it), else None."""
    uid, _, gid = user.partition(":")
    if uid.isdigit() and int(uid) != 0:
        return int(uid), int(gid) if gid.isdigit() else int(uid)
    return None


def docker_client(config: SandboxConfig) -> Any:
    """A client of the configured engine, with the configured timeout; SandboxError when it does not answer."""
    import docker

    try:
        if config.docker_host:
            client = docker.DockerClient(base_url=config.docker_host, timeout=config.docker_timeout_s)
        else:
            client = docker.from_env(timeout=config.docker_timeout_s)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - docker raises several unrelated types for "no engine"
        raise _engine_error(exc, config.docker_host) from exc
    return client


@functools.cache
def _seccomp_profile() -> str:
    return json.dumps(docker_profile())
