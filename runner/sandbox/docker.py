"""The docker backend: each sandboxed process (the agent, a script, the REPL, an evaluation) runs in a fresh
container of the configured image, with no network, a read-only root, a size-limited /tmp, memory, CPU and
process limits, and GPUs by device request when the task asks for them. The agent's container lives for the
whole run; code actions get their own, so the agent never shares a container with the workspace.

The process looks like a subprocess to the rest of the runner: its stdin/stdout/stderr are OS pipes fed from
the container's attach socket by a small thread that demultiplexes Docker's stream frames.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
from collections.abc import Sequence
from typing import Any

from .base import Limits, Mount, Sandbox, SandboxError
from .config import SandboxConfig
from .process import Exit

FRAME_HEADER = struct.Struct(">BxxxL")  # stream type (1 stdout, 2 stderr), 3 zero bytes, payload length


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


class SocketWriter:
    """The container's stdin, as a file-like object the runner can write, flush and close."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def write(self, data: bytes) -> int:
        self.sock.sendall(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)


class DockerProcess:
    """A container run as a process: pipes for its streams, and kill / reap / is_running for the runner."""

    def __init__(self, container: Any, sock: socket.socket) -> None:
        self.container = container
        self.sock = sock
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.stdout = os.fdopen(out_r, "rb", buffering=0)
        self.stderr = os.fdopen(err_r, "rb", buffering=0)
        self.stdin = SocketWriter(sock)
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
                with contextlib.suppress(Exception):
                    self.container.remove(force=True)
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
        self.python = config.interpreter
        self.ids = config.ids

    @classmethod
    def connect(cls, config: SandboxConfig) -> DockerSandbox:
        """A sandbox on the configured engine; SandboxError when the engine cannot be reached."""
        import docker

        try:
            client = docker.DockerClient(base_url=config.docker_host) if config.docker_host else docker.from_env()
            client.ping()
        except Exception as exc:  # noqa: BLE001 - docker raises several unrelated types for "no engine"
            raise _engine_error(exc, config.docker_host) from exc
        return cls(client, config.docker_image, config=config)

    def container_spec(
        self,
        argv: Sequence[str],
        *,
        mounts: Sequence[Mount],
        cwd: str,
        env: dict[str, str],
        limits: Limits,
        network: bool,
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
            ulimits.append(Ulimit(name="cpu", soft=limits.cpu_seconds, hard=limits.cpu_seconds))
        spec = {
            "image": self.image,
            "command": list(argv),
            "working_dir": cwd,
            "environment": env,
            "network_mode": "bridge" if network else "none",
            "mounts": [
                DockerMount(target=m.target, source=str(m.source), type="bind", read_only=not m.writable)
                for m in mounts
            ],
            "read_only": True,
            "tmpfs": {"/tmp": f"size={limits.tmp_mb}m"},
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "ulimits": ulimits,
            "pids_limit": limits.processes or -1,
            "stdin_open": True,
            "detach": True,
            "labels": {"mlab-bench": "sandbox"},
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
        if pass_fds:
            raise SandboxError("the docker sandbox cannot hand file descriptors to a container")
        full_env = self.environment(env, "/usr/local/bin")
        spec = self.container_spec(
            argv, mounts=mounts, cwd=cwd, env=full_env, limits=limits or Limits(), network=network
        )
        try:
            container = self.client.containers.create(**spec)
            sock = container.attach_socket(params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            raw = getattr(sock, "_sock", sock)
            container.start()
        except Exception as exc:  # noqa: BLE001 - every engine failure is a SandboxError for the run
            raise SandboxError(f"could not start a container of {self.image}: {exc}") from exc
        return DockerProcess(container, raw)
