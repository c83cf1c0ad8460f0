"""The sandbox kept for a run's scripts: one bwrap sandbox, a supervisor as its PID 1, one script at a time. What a
script leaves or tries against the supervisor never reaches the next script; a lost supervisor is an
infrastructure error of one action, and the next action gets a new sandbox."""

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from runner.execution import run_execute
from runner.models import Run
from runner.sandbox import Limits, cgroups
from runner.sandbox import supervised as supervised_module
from runner.services import run_create
from tests.factories import AgentFactory, validate_now

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.fixture
def kept_env(make_env):
    """An Environment whose scripts run in the bwrap sandbox kept for the run (whatever the settings say)."""
    made = []

    def make(**kwargs):
        env = make_env(**kwargs)
        env.sandbox.persistent = True
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


def script(env, name: str, source: str):
    (env.workspace / name).write_text(source)
    return env.execute("Execute Script", {"script_name": name})


def sandbox_pid(env) -> int:
    """The host pid of the kept sandbox (bwrap), which lives as long as its supervisor."""
    assert env._kept is not None and env._kept.alive
    return env._kept.proc.pid


def supervisor_pid(env) -> int:
    """The host pid of the supervisor: the process bwrap started in the sandbox."""
    bwrap = sandbox_pid(env)
    children = Path(f"/proc/{bwrap}/task/{bwrap}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


LIST_PROCESSES = "import os\nprint('processes', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
LIST_TMP = "import os\nprint('tmp', sorted(os.listdir('/tmp')))\n"


def fresh_tmp(env) -> str:
    """What a new sandbox's /tmp holds ("tmp []"; or the folder that leads to the interpreter's mount, when the
    interpreter lives under /tmp), as LIST_TMP prints it: a script's leftovers are measured against it."""
    return script(env, "fresh.py", LIST_TMP).observation.split("tmp ", 1)[1].splitlines()[0]


def test_a_background_process_left_by_one_script_is_gone_before_the_next_script_runs(kept_env):
    env = kept_env()
    fresh = fresh_tmp(env)
    left = script(
        env,
        "leave.py",
        "import os, subprocess\n"
        "quiet = {'stdout': subprocess.DEVNULL, 'stderr': subprocess.DEVNULL}\n"
        "daemon = subprocess.Popen(['sleep', '600'], start_new_session=True, **quiet)\n"
        "open('/tmp/left.txt', 'w').write('x')\n"
        "import ctypes\n"
        "print('segment', ctypes.CDLL(None).shmget(0, 1 << 20, 0o1000 | 0o600))\n"
        "print('left', daemon.pid)\n",
    )
    assert "left" in left.observation and "segment 0" in left.observation and not left.error, left.observation
    first = sandbox_pid(env)

    after = script(
        env,
        "look.py",
        LIST_PROCESSES + LIST_TMP + "print('segments', len(open('/proc/sysvipc/shm').read().splitlines()) - 1)\n",
    )

    # Only the supervisor (1) and this script: the sleeping daemon was killed; /tmp is empty, the segment gone.
    assert sandbox_pid(env) == first  # the same sandbox ran both
    processes = after.observation.split("processes ")[1].splitlines()[0]
    assert processes.startswith("[1, ") and processes.count(",") == 1, after.observation
    assert f"tmp {fresh}" in after.observation and "segments 0" in after.observation


ATTACK = r"""
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
for request in (PTRACE_ATTACH, PTRACE_SEIZE):
    result = libc.ptrace(request, 1, 0, 0)
    print("ptrace", request, "ATTACHED" if result == 0 else f"refused {ctypes.get_errno()}", flush=True)
for path in ("/proc/1/fd", "/proc/1/fd/0", "/proc/1/fd/3", "/proc/1/mem", "/proc/1/environ"):
    try:
        if path.endswith("fd"):
            print("OPENED", path, os.listdir(path), flush=True)
        else:
            with open(path, "rb+" if path.endswith("mem") or path[-1].isdigit() else "rb") as fh:
                print("OPENED", path, flush=True)
    except OSError as exc:
        print("refused", path, type(exc).__name__, flush=True)
for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGSEGV, signal.SIGSTOP,
               signal.SIGKILL):
    os.kill(1, signum)
print("signalled", flush=True)
try:
    os.kill(-1, signal.SIGKILL)  # every process but this one and PID 1: here, none
except ProcessLookupError:
    pass
print("SURVIVED")
"""


def test_a_script_that_attacks_the_supervisor_cannot_break_the_next_action(kept_env):
    env = kept_env()
    script(env, "warm.py", "print('warm')")
    first, supervisor = sandbox_pid(env), supervisor_pid(env)

    outcome = script(env, "attack.py", ATTACK)

    assert "ATTACHED" not in outcome.observation and "OPENED" not in outcome.observation, outcome.observation
    assert outcome.observation.count("refused") == 7, outcome.observation
    assert "SURVIVED" in outcome.observation
    assert "infrastructure_error" not in outcome.detail
    after = script(env, "next.py", LIST_PROCESSES)
    assert "processes [1, " in after.observation and not after.error, after.observation
    # Not a new sandbox: the supervisor took every signal, and no ptrace or /proc access reached it.
    assert sandbox_pid(env) == first and supervisor_pid(env) == supervisor


def test_a_script_that_lowers_the_supervisors_limits_gets_the_next_script_a_new_sandbox(kept_env):
    env = kept_env()
    script(env, "warm.py", "print('warm')")
    first = sandbox_pid(env)

    # prlimit needs no ptrace access, only the same user: the supervisor could no longer fork.
    attack = script(
        env,
        "prlimit.py",
        "import resource\nresource.prlimit(1, resource.RLIMIT_NPROC, (0, 0))\n"
        "resource.prlimit(1, resource.RLIMIT_NOFILE, (8, 8))\nprint('lowered')\n",
    )
    after = script(env, "next.py", LIST_PROCESSES)

    assert "lowered" in attack.observation and "infrastructure_error" not in attack.detail, attack.observation
    assert "processes [1, " in after.observation and not after.error, after.observation
    assert sandbox_pid(env) != first


def test_a_script_that_slows_the_supervisor_down_gets_the_next_script_a_new_sandbox(kept_env):
    env = kept_env()
    script(env, "warm.py", "print('warm')")
    first = sandbox_pid(env)

    attack = script(
        env,
        "slow.py",
        "import os\nos.setpriority(os.PRIO_PROCESS, 1, 19)\n"
        "os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0))\nprint('slowed')\n",
    )
    after = script(env, "next.py", "import os\nprint('nice', os.getpriority(os.PRIO_PROCESS, 1))\n")

    assert "slowed" in attack.observation and "infrastructure_error" not in attack.detail, attack.observation
    assert "nice 0" in after.observation, after.observation
    assert sandbox_pid(env) != first


def test_a_tmp_the_supervisor_cannot_empty_gets_the_next_script_a_new_sandbox(kept_env):
    env = kept_env()
    fresh = fresh_tmp(env)
    left = script(
        env, "lock.py", "import os\nos.makedirs('/tmp/locked/inner')\nos.chmod('/tmp/locked', 0)\nprint('locked')\n"
    )
    first = sandbox_pid(env) if env._kept.alive else None

    after = script(env, "look.py", LIST_TMP)

    assert "locked" in left.observation and "infrastructure_error" not in left.detail, left.observation
    assert f"tmp {fresh}" in after.observation, after.observation
    assert first is None  # the sandbox retired with its answer


def test_a_scripts_cpu_limit_and_time_limit_are_reported_and_do_not_carry_over(kept_env):
    env = kept_env(limits=Limits(cpu_seconds=1), action_timeout_s=4)

    busy = script(env, "busy.py", "while True:\n    pass\n")
    slept = script(env, "sleep.py", "import time\nprint('sleeping', flush=True)\ntime.sleep(60)\n")
    # Each script has the whole CPU limit: 0.6 s twice would not fit one limit of 1 s shared by the sandbox.
    burns = [
        script(env, "burn.py", "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end:\n"
               "    pass\nprint('burnt')\n")
        for _ in range(2)
    ]  # fmt: skip

    assert busy.error and "CPU time limit of 1 s" in busy.observation, busy.observation
    assert busy.detail["cpu_seconds"] >= 1 and busy.detail["limit"] == "it reached the CPU time limit of 1 s"
    assert slept.error and "4-second time limit" in slept.observation and "sleeping" in slept.observation
    assert all("burnt" in b.observation and not b.error for b in burns), [b.observation for b in burns]


def test_a_memory_bomb_is_reported_as_today_and_the_supervisor_goes_on(kept_env):
    env = kept_env(limits=Limits(memory_mb=256))
    # A script goes first when memory runs out (the supervisor keeps the default, 0).
    warm = script(env, "warm.py", "print('score', open('/proc/self/oom_score_adj').read().strip())")
    assert "score 1000" in warm.observation, warm.observation
    first, supervisor = sandbox_pid(env), supervisor_pid(env)

    bomb = script(env, "bomb.py", "blocks = [bytearray(64 * 1024 * 1024) for _ in range(64)]\nprint('ALLOCATED')")
    after = script(env, "next.py", "print('works again')")

    assert "ALLOCATED" not in bomb.observation
    assert bomb.detail["limit"] == "it was killed for using more than the memory limit of 256 MB", bomb.detail
    assert "works again" in after.observation and not after.error
    assert sandbox_pid(env) == first and supervisor_pid(env) == supervisor


@pytest.mark.skipif(os.geteuid() != 0 or not cgroups.available(), reason="needs a root worker and cgroups")
def test_an_oom_kill_that_takes_the_supervisor_is_reported_as_the_memory_limit_and_the_next_action_works(kept_env):
    env = kept_env(limits=Limits(memory_mb=256))
    script(env, "warm.py", "print('warm')")
    first = sandbox_pid(env)
    supervisor = supervisor_pid(env)

    def expose_the_supervisor(stream: str, data: bytes) -> None:
        # From outside, the supervisor is made the OOM killer's first choice (the script has put itself back to 0).
        if b"ready" in data:
            Path(f"/proc/{supervisor}/oom_score_adj").write_text("1000")
            (env.workspace / "go").write_text("")

    env.on_output = expose_the_supervisor
    bomb = script(
        env,
        "bomb.py",
        "import os, time\nopen('/proc/self/oom_score_adj', 'w').write('0')\nprint('ready', flush=True)\n"
        "while not os.path.exists('go'):\n    time.sleep(0.05)\n"
        "blocks = [bytearray(64 * 1024 * 1024) for _ in range(64)]\nprint('ALLOCATED')\n",
    )
    env.on_output = None
    after = script(env, "next.py", "print('works again')")

    assert "ALLOCATED" not in bomb.observation
    assert bomb.detail.get("limit") == "it was killed for using more than the memory limit of 256 MB", bomb
    assert "works again" in after.observation and not after.error
    assert sandbox_pid(env) != first  # the supervisor went with the command: a new sandbox


def test_a_supervisor_killed_from_outside_is_an_infrastructure_error_and_the_next_action_works(kept_env):
    env = kept_env()
    script(env, "warm.py", "print('warm')")
    first = sandbox_pid(env)
    supervisor = supervisor_pid(env)

    def kill_on_start(stream: str, data: bytes) -> None:
        if b"started" in data:
            os.kill(supervisor, signal.SIGKILL)

    env.on_output = kill_on_start
    lost = script(env, "long.py", "import time\nprint('started', flush=True)\ntime.sleep(30)\nprint('FINISHED')\n")
    env.on_output = None

    assert lost.error and "infrastructure error" in lost.observation, lost.observation
    assert "FINISHED" not in lost.observation and "infrastructure_error" in lost.detail
    after = script(env, "next.py", "print('works again')")
    assert "works again" in after.observation and not after.error
    assert sandbox_pid(env) != first


def test_a_supervisor_killed_between_actions_is_replaced_without_an_error(kept_env):
    env = kept_env()
    script(env, "warm.py", "print('warm')")
    first = sandbox_pid(env)
    os.kill(supervisor_pid(env), signal.SIGKILL)
    env._kept.proc.wait()  # the sandbox ends with its supervisor

    after = script(env, "next.py", "print('works again')")

    assert "works again" in after.observation and not after.error, after.observation
    assert sandbox_pid(env) != first


def test_a_supervisor_that_stops_answering_is_ended_from_outside_and_the_next_action_works(kept_env, monkeypatch):
    monkeypatch.setattr(supervised_module, "GRACE_S", 1.0)
    env = kept_env()
    script(env, "warm.py", "print('warm')")
    first, supervisor = sandbox_pid(env), supervisor_pid(env)

    def stop_on_start(stream: str, data: bytes) -> None:
        if b"started" in data:
            os.kill(supervisor, signal.SIGSTOP)  # from outside: it can no longer answer

    env.on_output = stop_on_start
    # It goes on a moment after its line, so the supervisor is stopped before the script ends, not after.
    hung = script(env, "short.py", "import time\nprint('started', flush=True)\ntime.sleep(0.5)\n")
    env.on_output = None

    assert hung.error and "did not answer in time" in hung.observation, hung.observation
    assert not Path(f"/proc/{first}").exists() or Path(f"/proc/{first}/stat").read_text().split()[2] == "Z"
    after = script(env, "next.py", "print('works again')")
    assert "works again" in after.observation and sandbox_pid(env) != first


def test_closing_the_environment_ends_the_kept_sandbox(kept_env):
    env = kept_env()
    script(env, "warm.py", "print('warm')")
    proc = env._kept.proc
    cgroup = getattr(proc, "cgroup", None)

    env.close()

    assert proc.poll() is not None
    assert cgroup is None or not any(path.exists() for path in cgroup.paths.values())


def test_a_command_the_worker_never_stops_is_stopped_by_the_supervisor_after_its_time_limit(make_env):
    from runner.execution.sandboxes import get_sandbox

    env = make_env()
    box = get_sandbox("bwrap")
    kept = supervised_module.SupervisedSandbox(box, mounts=env.mounts(), limits=env.limits)
    try:
        proc = kept.popen(["sleep", "60"], cwd="/workspace", env={}, limits=env.limits, timeout=1)
        assert proc.stdout.read() == b""  # blocks until the command and all it started are gone
        info = proc.reap_exit()
        # Killed, not ended: `sleep 60` left alone exits 0, and nothing but the supervisor stops it here.
        assert info.code == -signal.SIGKILL
    finally:
        kept.close()


WORKER = """
import os, signal, sys
from pathlib import Path
import django
django.setup()
from runner.actions import Environment
from runner.sandbox.identity import writable_for_sandbox
from runner.execution.sandboxes import get_sandbox

workspace = Path(sys.argv[1])
box = get_sandbox("bwrap")
box.persistent = True
(workspace / "long.py").write_text("import time\\nprint('started', flush=True)\\ntime.sleep(600)\\n")
writable_for_sandbox(workspace, box.ids)
env = Environment(workspace=workspace, sandbox=box, python=box.python)

def die_on_start(stream, data):
    if b"started" in data:
        bwrap = env._kept.proc.pid
        supervisor = Path(f"/proc/{bwrap}/task/{bwrap}/children").read_text().split()[0]
        script = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()[0]
        print(supervisor, script, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies without closing anything

env.on_output = die_on_start
env.execute("Execute Script", {"script_name": "long.py"})
"""


def test_a_worker_that_dies_during_a_script_takes_the_kept_sandbox_with_it(tmp_path):
    import subprocess
    import sys

    workspace = tmp_path / "workspace"
    workspace.mkdir()
    worker = subprocess.run(
        [sys.executable, "-c", WORKER, str(workspace)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[3],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "bench.settings"},
    )
    assert worker.returncode == -signal.SIGKILL, worker.stderr
    supervisor, running = (int(pid) for pid in worker.stdout.split())

    def gone(pid: int) -> bool:  # exited (a zombie of a parent that is gone counts: it holds nothing)
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except FileNotFoundError:
            return True

    deadline = time.monotonic() + 20
    while not (gone(supervisor) and gone(running)):
        assert time.monotonic() < deadline, "the sandbox outlived its worker"
        time.sleep(0.1)


def own_groups() -> list[Path]:
    """The cgroups this process's sandboxes hold now (one per live sandbox)."""
    layout = cgroups._layout()
    if layout is None:
        return []
    return [group for base in layout[1].values() for group in base.glob(f"s{os.getpid()}-*")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not cgroups.available(), reason="no cgroups here")
def test_a_run_handed_back_during_a_script_leaves_no_sandbox_behind(tiny_task, broker_down, settings):
    settings.BENCH_SANDBOX_PERSISTENT = True
    validate_now(tiny_task)
    long = "import time\nprint('started', flush=True)\ntime.sleep(600)\n"
    script = [
        {"type": "act", "action": "Write File", "input": {"file_name": "long.py", "content": long}},
        {"type": "act", "action": "Execute Script", "input": {"script_name": "long.py"}},
    ]
    run = run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False)
    before = set(own_groups())

    def execute():
        try:
            run_execute(run.pk)
        finally:
            connection.close()

    thread = threading.Thread(target=execute)
    thread.start()
    deadline = time.monotonic() + 60
    while "started" not in Run.objects.get(pk=run.pk).live_output:
        assert time.monotonic() < deadline and thread.is_alive(), "the script never started"
        time.sleep(0.2)
    assert set(own_groups()) > before  # the agent's sandbox and the one kept for the scripts
    Run.objects.filter(pk=run.pk).update(hand_back_requested_at=timezone.now())
    thread.join(timeout=60)

    assert not thread.is_alive()
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
    assert set(own_groups()) == before
