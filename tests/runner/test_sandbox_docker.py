"""The docker backend without a Docker engine (none runs on this machine): the container spec it builds (for an
evaluation too), its stream demultiplexer on a real socket, and the error when the engine is unreachable."""

import os
import socket
import struct
from pathlib import Path

import pytest

from runner.evaluation import HARNESS_DIR, evaluate
from runner.preparation import task_version_prepare
from runner.sandbox import Limits, Mount, SandboxError
from runner.sandbox.docker import DockerSandbox, StreamDemux
from runner.sandboxes import get_sandbox


def test_the_container_spec_isolates_and_limits(settings):
    sandbox = DockerSandbox(client=None, image="mlab-bench-sandbox:test")
    spec = sandbox.container_spec(
        ["python", "-u", "train.py"],
        mounts=[
            Mount(Path("/srv/ws"), "/workspace", writable=True),
            Mount(Path("/srv/ws/data.csv"), "/workspace/data.csv"),
        ],
        cwd="/workspace",
        env={"OMP_NUM_THREADS": "2"},
        limits=Limits(memory_mb=2048, processes=128, file_size_mb=100, tmp_mb=256, cpu_seconds=600, cpus=2, gpus=1),
        network=False,
    )

    assert spec["image"] == "mlab-bench-sandbox:test"
    assert spec["network_mode"] == "none"
    assert spec["read_only"] is True and spec["cap_drop"] == ["ALL"]
    assert spec["mem_limit"] == spec["memswap_limit"] == "2048m"
    assert spec["pids_limit"] == 128 and spec["nano_cpus"] == 2_000_000_000
    assert spec["tmpfs"] == {"/tmp": "size=256m"}
    mounts = {(m["Target"], m["Source"], m["ReadOnly"]) for m in spec["mounts"]}
    assert mounts == {("/workspace", "/srv/ws", False), ("/workspace/data.csv", "/srv/ws/data.csv", True)}
    ulimits = {u["Name"]: u["Hard"] for u in spec["ulimits"]}
    assert ulimits["fsize"] == 100 * 1024 * 1024 and ulimits["cpu"] == 600
    assert spec["device_requests"][0]["Count"] == 1
    assert spec["device_requests"][0]["Capabilities"] == [["gpu"]]


def test_networked_preparation_gets_a_network():
    spec = DockerSandbox(client=None, image="x").container_spec(
        ["python"], mounts=[], cwd="/", env={}, limits=Limits(), network=True
    )
    assert spec["network_mode"] == "bridge" and "device_requests" not in spec


def test_an_unreachable_engine_is_a_clear_error(settings, monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    settings.BENCH_DOCKER_HOST = "unix:///nonexistent/docker.sock"
    with pytest.raises(SandboxError, match=r"Docker engine at unix:///nonexistent/docker.sock is unreachable"):
        get_sandbox("docker")


def test_the_demultiplexer_splits_docker_frames_into_stdout_and_stderr():
    ours, theirs = socket.socketpair()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    demux = StreamDemux(ours, out_w, err_w)
    demux.start()

    for kind, payload in [(1, b"hello "), (2, b"warning\n"), (1, b"world\n"), (1, b"x" * 70000)]:
        theirs.sendall(struct.pack(">BxxxL", kind, len(payload)) + payload)
    theirs.close()

    with os.fdopen(out_r, "rb") as out, os.fdopen(err_r, "rb") as err:
        assert out.read() == b"hello world\n" + b"x" * 70000  # more than a pipe holds: read while it writes
        assert err.read() == b"warning\n"
    demux.join(timeout=5)
    assert not demux.is_alive()


class RecordingEngine:
    """Stands in for the engine, which cannot run here: keeps the spec of the container asked for, then fails."""

    def __init__(self) -> None:
        self.containers = self
        self.specs: list[dict] = []

    def create(self, **spec) -> None:
        self.specs.append(spec)
        raise ConnectionError("no engine here")


@pytest.mark.django_db
def test_an_evaluation_container_runs_the_harness_mounted_read_only(tiny_task, settings):
    prepared = task_version_prepare(tiny_task)
    settings.BENCH_SANDBOX = "docker"  # the image's interpreter from here on
    engine = RecordingEngine()

    with pytest.raises(SandboxError, match="could not start a container"):
        evaluate(prepared, prepared.env_manifest, sandbox=DockerSandbox(client=engine, image="x"))

    (spec,) = engine.specs
    assert spec["command"] == [
        "/usr/local/bin/python",
        "/opt/mlab/harness/score.py",
        "/task/scripts",
        "/task/env",
        "/task/out",
    ]
    mounts = {m["Target"]: (m["Source"], m["ReadOnly"]) for m in spec["mounts"]}
    assert mounts["/opt/mlab/harness"] == (str(HARNESS_DIR), True)
    assert mounts["/task/scripts"] == (str(prepared.scripts_dir), True)
    assert mounts["/task/out"][1] is False
