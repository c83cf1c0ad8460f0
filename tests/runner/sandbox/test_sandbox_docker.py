"""The docker backend: the container spec it builds (for an evaluation too), its stream demultiplexer on a real
socket and the error when the engine is unreachable; then, on a real engine with the sandbox image (skipped
without), its processes' pipes, the client timeout, where containers go when they end, when a create fails and
when their worker died, and a GPU request as the engine receives it. The escape suite, the containment tests and
whole runs are run on docker too (``backend``)."""

import contextlib
import os
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import docker
import pytest
import requests

from runner.execution.evaluation import HARNESS_DIR, evaluate
from runner.execution.preparation import task_version_prepare
from runner.execution.protocol import AgentChannel
from runner.execution.sandboxes import get_sandbox
from runner.sandbox import Limits, Mount, SandboxError
from runner.sandbox.docker import REMOVER, DockerSandbox, StreamDemux, owner_token, process_start_ticks
from runner.sandbox.process import is_running, reap, run_process
from tests.backends import BACKENDS, skip_unless_backend


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
    ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in spec["ulimits"]}
    assert ulimits["fsize"] == (100 * 1024 * 1024,) * 2
    assert ulimits["cpu"] == (600, 605)  # SIGXCPU at the limit, SIGKILL 5 s later
    assert spec["device_requests"][0]["Count"] == 1
    assert spec["device_requests"][0]["Capabilities"] == [["gpu"]]
    assert spec["init"] is True  # the script is not PID 1: SIGXCPU and SIGXFSZ reach it
    assert spec["labels"]["mlab-bench"] == "sandbox" and spec["labels"]["mlab-bench.owner"].endswith(
        f"/{os.getpid()}/{process_start_ticks(os.getpid())}"
    )


def test_a_process_given_a_stdin_pipe_gets_stdin_once():
    box = DockerSandbox(client=None, image="x")
    piped = box.container_spec(["cat"], mounts=[], cwd="/", env={}, limits=Limits(), network=False, stdin=True)
    plain = box.container_spec(["cat"], mounts=[], cwd="/", env={}, limits=Limits(), network=False)
    # docker-py asks for StdinOnce only for a container created "not detached" with stdin open.
    assert piped["stdin_open"] is True and piped["detach"] is False
    assert plain["stdin_open"] is False


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

    def list(self, **filters) -> list:
        return []  # what the sweep after a failed create finds


@pytest.mark.django_db
def test_an_evaluation_container_runs_the_harness_mounted_read_only(tiny_task, settings):
    prepared = task_version_prepare(tiny_task)
    settings.BENCH_SANDBOX = "docker"  # the image's interpreter from here on
    engine = RecordingEngine()

    with pytest.raises(SandboxError, match="could not create a container"):
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
    assert "device_requests" not in spec  # the task asks for no GPU


@pytest.mark.django_db
def test_the_evaluation_of_a_task_that_asks_for_gpus_requests_them(tiny_task, settings):
    prepared = task_version_prepare(tiny_task)
    prepared.version.resources = {**prepared.version.resources, "gpus": 2}
    settings.BENCH_SANDBOX = "docker"
    engine = RecordingEngine()

    with pytest.raises(SandboxError, match="could not create a container"):
        evaluate(prepared, prepared.env_manifest, sandbox=DockerSandbox(client=engine, image="x"))

    (spec,) = engine.specs
    assert spec["device_requests"][0]["Count"] == 2 and spec["device_requests"][0]["Capabilities"] == [["gpu"]]


# -- on a real engine ------------------------------------------------------------------------------------------


@pytest.fixture
def engine(settings):
    """A docker sandbox on this machine's engine with the sandbox image (the test is skipped without them); at the
    end, every container the test made is gone."""
    skip_unless_backend("docker")
    box = get_sandbox("docker")
    ours = {"label": f"mlab-bench.owner={owner_token()}"}
    before = {c.id for c in box.client.containers.list(all=True, filters=ours)}
    yield box
    REMOVER.drain()
    left = box.client.containers.list(all=True, filters=ours)
    for container in left:
        if container.id not in before:
            container.remove(force=True)
    assert {c.id for c in left} <= before, "the test left sandbox containers behind"


def container_gone(client, container_id: str, within_s: float = 60) -> bool:
    """Whether the container is removed within a bound (the sweep after a failed create works in the background)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            client.containers.get(container_id)
        except docker.errors.NotFound:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


@pytest.mark.docker
def test_stdin_is_a_pipe_and_closing_it_ends_the_process(engine):
    proc = engine.popen(["python", "-c", "import sys; print(sys.stdin.read()[::-1])"], mounts=[], cwd="/tmp",
                        stdin=subprocess.PIPE)  # fmt: skip
    os.set_blocking(proc.stdin.fileno(), False)  # what the agent channel and the REPL do with it
    os.write(proc.stdin.fileno(), b"olleh")
    proc.stdin.close()  # end of file for the process: it ends by itself, not by a kill

    result = run_process(proc, timeout=60)

    assert not result.timed_out and result.exit_code == 0
    assert result.stdout.strip() == "hello"


@pytest.mark.docker
def test_a_process_without_a_stdin_pipe_reads_end_of_file(engine):
    proc = engine.popen(["python", "-c", "import sys; print(repr(sys.stdin.read()))"], mounts=[], cwd="/tmp")
    assert proc.stdin is None
    result = run_process(proc, timeout=60)
    assert result.exit_code == 0 and result.stdout.strip() == "''"


@pytest.mark.docker
def test_the_client_timeout_is_the_setting_and_a_silent_process_outlives_it(settings):
    settings.BENCH_DOCKER_TIMEOUT_S = 2
    skip_unless_backend("docker")
    box = get_sandbox("docker")
    assert box.client.api.timeout == 2
    # Silent for longer than the client waits for an answer (an agent waiting for a long Execute Script).
    proc = box.popen(["sh", "-c", "sleep 5; echo late"], mounts=[], cwd="/tmp")
    result = run_process(proc, timeout=60)
    assert result.stdout == "late\n" and result.exit_code == 0
    assert REMOVER.drain()


@pytest.mark.docker
def test_an_ended_container_is_removed_after_its_process_is_reaped_not_before(engine):
    held = threading.Event()
    blocker = SimpleNamespace(remove=lambda force: held.wait(60))
    REMOVER.remove(blocker)  # the remover is busy: the reap must not wait for it
    proc = engine.popen(["python", "-c", "print('done')"], mounts=[], cwd="/tmp")

    info = reap(proc)  # not run_process: it reaps too, and the container would be handed over before the blocker

    assert info.code == 0 and proc.stdout.read() == b"done\n"
    proc.stdout.close()
    proc.stderr.close()
    assert engine.client.containers.get(proc.container.id).status == "exited"  # still there: removal comes later
    held.set()
    assert REMOVER.drain() and container_gone(engine.client, proc.container.id, within_s=5)


@pytest.mark.docker
def test_a_memory_hog_is_reported_as_killed_for_memory(engine):
    proc = engine.popen(["python", "-c", "x = bytearray(512 << 20)"], mounts=[], cwd="/tmp",
                        limits=Limits(memory_mb=128))  # fmt: skip
    run_process(proc, timeout=60)
    assert reap(proc).oom_killed


class ClientGivesUp:
    """The real engine behind a client that gives up on every create after sending it (as a client whose timeout
    runs out while a slow storage driver makes the container): the engine still makes it."""

    def __init__(self, client) -> None:
        self.real = client
        self.containers = self
        self.made: list[str] = []

    def create(self, **spec):
        self.made.append(self.real.containers.create(**spec).id)
        raise requests.exceptions.ReadTimeout("Read timed out. (read timeout=60)")

    def list(self, **kwargs):
        return self.real.containers.list(**kwargs)


@pytest.mark.docker
def test_a_container_whose_create_the_client_gave_up_on_is_removed(engine):
    box = DockerSandbox(client=ClientGivesUp(engine.client), image=engine.image)

    with pytest.raises(SandboxError, match="could not create a container of .*Read timed out"):
        box.popen(["sleep", "600"], mounts=[], cwd="/tmp")

    (made,) = box.client.made
    assert container_gone(engine.client, made)


@pytest.mark.docker
def test_a_task_asking_for_a_gpu_sends_a_device_request_to_the_engine(engine):
    # No GPU here: the engine refuses to start a container with the device request, which proves it received one;
    # the container that could not start is removed (the engine fixture checks that nothing is left).
    with pytest.raises(SandboxError, match=r"could not start a container.*capabilities: \[\[gpu\]\]"):
        engine.popen(["python", "-c", "print(1)"], mounts=[], cwd="/tmp", limits=Limits(gpus=1))


@pytest.mark.docker
def test_a_worker_start_sweeps_the_containers_of_dead_workers_only(engine, settings):
    from runner.execution.workers import sweep_sandbox_containers

    dead = subprocess.Popen(["sleep", "0"])
    dead_token = f"{socket.gethostname()}/{dead.pid}/{process_start_ticks(dead.pid)}"
    dead.wait()

    def container(owner: str):
        labels = {"mlab-bench": "sandbox", "mlab-bench.owner": owner, "mlab-bench.sandbox-id": "sweep-test"}
        return engine.client.containers.create(engine.image, ["sleep", "600"], labels=labels, network_mode="none")

    made = [container(dead_token), container(owner_token()), container(f"another-host/{os.getpid()}/1")]
    orphan, live, elsewhere = made
    orphan.start()
    settings.BENCH_SANDBOX = "docker"
    try:
        sweep_sandbox_containers()  # what a worker's start runs

        assert container_gone(engine.client, orphan.id, within_s=0)
        assert engine.client.containers.get(live.id) and engine.client.containers.get(elsewhere.id)
    finally:
        for made_here in made:
            with contextlib.suppress(docker.errors.NotFound):
                made_here.remove(force=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_agent_whose_channel_cannot_be_built_is_killed(backend, tmp_path):
    skip_unless_backend(backend)
    box = get_sandbox(backend)
    # A process started without a stdin pipe: no channel can be built on it.
    proc = box.popen([box.python, "-c", "import time; time.sleep(600)"], mounts=[], cwd="/tmp")

    with pytest.raises(AttributeError):
        AgentChannel(proc, tmp_path / "agent.stderr.log")

    assert not is_running(proc)
    if backend == "docker":
        assert REMOVER.drain() and container_gone(box.client, proc.container.id, within_s=5)
