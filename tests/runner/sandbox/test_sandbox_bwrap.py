"""What a script run through Execute Script in the bwrap sandbox cannot do."""

import os
import random
import shutil
import string
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

CONNECT = """
import socket
try:
    socket.create_connection(("127.0.0.1", 5432), timeout=3)
    print("CONNECTED")
except OSError as exc:
    print("refused:", exc)
"""


def test_a_script_cannot_connect_to_the_database_port(make_env):
    # The port is open on the host (PostgreSQL): the refusal comes from the sandbox's empty network.
    import socket

    socket.create_connection(("127.0.0.1", 5432), timeout=3).close()
    env = make_env({"connect.py": CONNECT})

    outcome = env.execute("Execute Script", {"script_name": "connect.py"})

    assert "CONNECTED" not in outcome.observation
    assert "refused:" in outcome.observation


def test_a_script_cannot_write_outside_the_workspace(make_env, tmp_path):
    outside = tmp_path / "outside.txt"
    script = f"""
import os
for target in [{str(outside)!r}, "/usr/escape.txt", "/etc/escape.txt", "../escape.txt"]:
    try:
        with open(target, "w") as fh:
            fh.write("escaped")
        print("WROTE", target, os.path.realpath(target))
    except OSError as exc:
        print("blocked", target, type(exc).__name__)
"""
    env = make_env({"escape.py": script})

    outcome = env.execute("Execute Script", {"script_name": "escape.py"})

    assert not outside.exists()
    assert not (tmp_path / "escape.txt").exists()
    assert outcome.observation.count("blocked") >= 3, outcome.observation
    # "../escape.txt" from /workspace is /escape.txt inside the sandbox's own root, never the host's.
    assert "WROTE /usr" not in outcome.observation and "WROTE /etc" not in outcome.observation


def test_a_read_only_task_file_cannot_be_changed_by_a_script(make_env):
    script = """
try:
    with open("data.txt", "w") as fh:
        fh.write("changed")
    print("CHANGED")
except OSError as exc:
    print("blocked", type(exc).__name__)
"""
    env = make_env({"data.txt": "original", "change.py": script}, read_only_files=["data.txt"])

    outcome = env.execute("Execute Script", {"script_name": "change.py"})

    assert "blocked" in outcome.observation
    assert (env.workspace / "data.txt").read_text() == "original"


def test_a_script_sees_no_platform_secrets(make_env, monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "do-not-leak")
    env = make_env({"env.py": "import os\nprint(sorted(os.environ))\nprint(os.environ.get('SECRET_KEY'))"})

    outcome = env.execute("Execute Script", {"script_name": "env.py"})

    assert "do-not-leak" not in outcome.observation
    assert "DATABASE_URL" not in outcome.observation


@pytest.mark.skipif(not __import__("runner.sandbox.cgroups").sandbox.cgroups.available(), reason="no cgroups here")
def test_a_group_another_worker_removes_before_the_sandbox_enters_it_is_made_again(make_env, monkeypatch):
    # Another worker starting up removes this worker's groups while they hold no process: here, between the
    # group's creation and the child joining it.
    from runner.sandbox import cgroups

    created = cgroups.Cgroup.create.__func__
    removed = []

    def create_then_lose(cls, **kwargs):
        group = created(cls, **kwargs)
        if not removed:
            removed.append(group)
            mine, cgroups.WORKER = cgroups.WORKER, "w-another-worker"
            try:
                for path in group.paths.values():
                    cgroups._remove_empty_others(path.parent.parent)
            finally:
                cgroups.WORKER = mine
        return group

    monkeypatch.setattr(cgroups.Cgroup, "create", classmethod(create_then_lose))
    env = make_env({"hello.py": "print('hello')"}, sandbox="bwrap")
    env.sandbox.persistent = False

    outcome = env.execute("Execute Script", {"script_name": "hello.py"})

    assert removed and not any(path.exists() for path in removed[0].paths.values())
    assert "hello" in outcome.observation and not outcome.error, outcome.observation


SEES_GPUS = """
import os, sys
names = [name for name in sys.argv[1:] if os.path.exists(name)]
print(os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("CUDA_DEVICE_ORDER"), ",".join(names))
"""


@pytest.mark.parametrize("persistent", [False, True])
def test_a_task_with_gpus_gets_its_device_files_and_cuda_is_told_which(tmp_path, persistent):
    """No GPU here: files stand in for /dev/nvidia*, and the sandbox binds the first ones the task asks for, the
    driver's shared ones beside (where they exist), and says which in CUDA_VISIBLE_DEVICES, in a sandbox of its
    own or in the one kept for a run's scripts. ``benchmarks/gpu_check.py`` proves a real GPU end to end."""
    from runner.execution.sandboxes import sandbox_config
    from runner.sandbox import Limits, Mount
    from runner.sandbox.base import SandboxError
    from runner.sandbox.bwrap import BwrapSandbox
    from runner.sandbox.process import run_process

    # Directly in a folder the sandbox has, as /dev/nvidia0 is in /dev (bwrap makes the folders above a bound file
    # for root only); named apart by letters, as the index is read from the digits.
    prefix = "/dev/shm/" + "".join(random.choices(string.ascii_lowercase, k=12)) + "-nvidia"
    names = [f"{prefix}{n}" for n in (0, 1, 10)]
    for name in names:
        Path(name).write_text("")
    try:
        config = sandbox_config("bwrap")
        sandbox = BwrapSandbox(config.interpreter, ids=config.ids, persistent=persistent, gpu_devices=f"{prefix}[0-9]*")
        (tmp_path / "sees.py").write_text(SEES_GPUS)
        os.chmod(tmp_path, 0o755)
        argv = [sandbox.python, "/gpucheck/sees.py", *names]
        mounts, limits = [Mount(tmp_path, "/gpucheck")], Limits(gpus=2)
        kept = sandbox.keep(mounts=mounts, limits=limits)
        if kept:
            proc = kept.popen(argv, cwd="/", env={}, limits=limits)
        else:
            proc = sandbox.popen(argv, mounts=mounts, cwd="/", limits=limits)
        result = run_process(proc, timeout=60, keep_bytes=10_000)
        if kept:
            kept.close()
        assert result.stdout.split() == ["0,1", "PCI_BUS_ID", f"{names[0]},{names[1]}"], result.stderr
        with pytest.raises(SandboxError, match="the task asks for 4 GPUs; this worker has 3"):
            sandbox.popen(argv, mounts=mounts, cwd="/", limits=Limits(gpus=4))
    finally:
        for name in names:
            os.unlink(name)


def test_a_script_can_make_process_semaphores_so_joblib_runs_in_parallel(make_env):
    # multiprocessing's locks live in /dev/shm; without a writable one joblib warns "[Errno 13] Permission
    # denied. joblib will operate in serial mode" at the top of every script that imports scikit-learn.
    script = """
import multiprocessing, warnings
warnings.simplefilter("error")
lock = multiprocessing.Lock()
from joblib import Parallel, delayed
print("squares", Parallel(n_jobs=2)(delayed(pow)(i, 2) for i in range(4)))
"""
    env = make_env({"shm.py": script})

    outcome = env.execute("Execute Script", {"script_name": "shm.py"})

    assert "squares [0, 1, 4, 9]" in outcome.observation, outcome.observation
    assert "Permission denied" not in outcome.observation


def test_a_script_starts_without_the_platforms_editable_install_finder(make_env):
    # The finder an editable install's .pth adds costs every interpreter start about 7 ms, and sandboxed code has
    # no use for the platform's own modules.
    import sys

    names = "[getattr(f, '__name__', type(f).__name__) for f in sys.meta_path]"
    host = [getattr(f, "__name__", type(f).__name__) for f in sys.meta_path]  # the line the script runs
    script = f"import sys; print('finders', {names})\nimport sklearn; print('ok')"
    env = make_env({"finders.py": script})

    outcome = env.execute("Execute Script", {"script_name": "finders.py"})

    assert "_EditableFinder" in host  # the test's own interpreter has it: an editable install (make install)
    assert "finders [" in outcome.observation and "ok" in outcome.observation, outcome.observation
    assert "_EditableFinder" not in outcome.observation


def test_dev_shm_is_bounded_and_the_next_script_finds_it_empty(make_env):
    # A private /dev/shm is memory, as /tmp is: as large as /tmp, and emptied after each script of a kept sandbox.
    from runner.sandbox.base import Limits

    env = make_env({"fill.py": FILL_SHM, "look.py": "import os\nprint('left', sorted(os.listdir('/dev/shm')))"},
                   limits=Limits(tmp_mb=32))  # fmt: skip

    filled = env.execute("Execute Script", {"script_name": "fill.py"})
    looked = env.execute("Execute Script", {"script_name": "look.py"})

    assert "No space left" in filled.observation and "FILLED" not in filled.observation, filled.observation
    assert "left []" in looked.observation, looked.observation


FILL_SHM = """
try:
    with open("/dev/shm/fill.bin", "wb") as fh:
        for _ in range(100):
            fh.write(b"x" * 1024 * 1024)
    print("FILLED")
except OSError as exc:
    print("blocked", exc)
"""
