"""The sandbox kept for a run's scripts is launched as the agent starts, not on the first Execute Script: the first
script finds it running and runs in it, it sees the workspace as a sandbox started by that script would, and it
ends with the run whether a script ran in it or not (an end, a cancel, a hand-back); a launched sandbox that died
is started again by the first script."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
from django.utils import timezone

from runner.actions import Environment
from runner.execution import RunSession, run_execute
from runner.execution.sandboxes import get_sandbox
from runner.models import Run, Step
from runner.sandbox import cgroups
from runner.services import run_cancel, run_create
from tests.factories import AgentFactory
from tests.runner.execution.test_run_lifecycle import execute_in_thread

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# What a script sees of its sandbox: who it is, its limits, its mounts (where, how, which filesystem: not from
# which host path, which differs from run to run) and the workspace's files with their modes and owners.
PROBE = r"""
import json, os, resource
mounts = []
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    dash = fields.index("-")
    mounts.append([fields[4], fields[5], fields[dash + 1]])
files = {}
for folder, _dirs, names in os.walk("."):
    for name in [folder, *(os.path.join(folder, n) for n in names)]:
        st = os.lstat(name)
        files[name] = [oct(st.st_mode), st.st_uid, st.st_gid]
limits = {n: resource.getrlimit(getattr(resource, n)) for n in sorted(dir(resource)) if n.startswith("RLIMIT_")}
print("PROBE " + json.dumps({
    "ids": [os.getuid(), os.getgid(), os.getgroups()], "cwd": os.getcwd(), "pid": os.getpid() > 1,
    "mounts": mounts, "files": files, "limits": limits, "env": sorted(os.environ),
    "tmp": sorted(os.listdir("/tmp")), "writable": os.access(".", os.W_OK),
    "read_only": os.access("data.txt", os.W_OK),
}))
"""


def act(action: str, **args) -> dict:
    return {"type": "act", "action": action, "input": args}


@pytest.fixture
def first_scripts(monkeypatch):
    """Each Execute Script as it arrives: the host pid of the kept sandbox running then (None: none was), and the
    one that ran it."""
    seen: list[tuple[int | None, int | None]] = []
    execute = Environment.execute

    def spy(env: Environment, name: str, action_input: object):
        if name != "Execute Script":
            return execute(env, name, action_input)
        before = env._kept.proc.pid if env._kept is not None and env._kept.alive else None
        outcome = execute(env, name, action_input)
        seen.append((before, env._kept.proc.pid if env._kept is not None and env._kept.alive else None))
        return outcome

    monkeypatch.setattr(Environment, "execute", spy)
    return seen


@pytest.fixture
def launched(monkeypatch):
    """The kept sandboxes launched (their bwrap processes), and an event set at each launch."""
    boxes: list = []
    event = threading.Event()
    launch = Environment.kept_sandbox_launch

    def spy(env: Environment) -> None:
        launch(env)
        boxes.append(env._kept.proc)
        event.set()

    monkeypatch.setattr(Environment, "kept_sandbox_launch", spy)
    return boxes, event


def own_groups() -> set[Path]:
    """The cgroups this process's sandboxes hold now (one per live sandbox)."""
    layout = cgroups._layout()
    if layout is None:
        return set()
    return {group for base in layout[1].values() for group in base.glob(f"s{os.getpid()}-*")}


def ended(proc) -> bool:
    """The sandbox's bwrap has exited and been reaped, and its cgroup (if it had one) is gone."""
    cgroup = getattr(proc, "cgroup", None)
    return proc.poll() is not None and (cgroup is None or not any(p.exists() for p in cgroup.paths.values()))


def probe_of(run: Run) -> dict:
    step = Step.objects.get(run=run, action="Execute Script")
    return json.loads(step.observation.split("PROBE ", 1)[1].splitlines()[0])


@pytest.mark.django_db(transaction=True)
def test_the_first_script_of_a_run_runs_in_the_sandbox_started_before_it_was_asked_for(
    tiny_task_ready, settings, first_scripts, launched
):
    settings.BENCH_SANDBOX_PERSISTENT = True
    script = [act("Execute Script", script_name="train.py"), act("Final Answer", final_answer="done")]
    run = run_create(task=tiny_task_ready.task, agent=AgentFactory(config={"script": script}), enqueue=False)

    run = run_execute(run.pk)

    assert run.status == Run.Status.FINISHED, run.error
    boxes, _ = launched
    [(running, ran_in)] = first_scripts
    # Running when the script arrived, and the same sandbox ran it: the one launched as the agent started.
    assert running is not None and ran_in == running == boxes[0].pid
    assert ended(boxes[0])


@pytest.mark.django_db(transaction=True)
def test_a_sandbox_started_ahead_sees_the_workspace_as_one_started_by_the_first_script(
    tiny_task_ready, settings, monkeypatch, first_scripts
):
    settings.BENCH_SANDBOX_PERSISTENT = True
    script = [
        act("Write File", file_name="probe.py", content=PROBE),
        act("Execute Script", script_name="probe.py"),
        act("Final Answer", final_answer="done"),
    ]
    agent = AgentFactory(config={"script": script})
    ahead = run_execute(run_create(task=tiny_task_ready.task, agent=agent, enqueue=False).pk)
    monkeypatch.setattr(RunSession, "agent_started", lambda self: None)  # as before: started by the first script
    late = run_execute(run_create(task=tiny_task_ready.task, agent=agent, enqueue=False).pk)

    assert ahead.status == late.status == Run.Status.FINISHED, (ahead.error, late.error)
    assert first_scripts[0][0] is not None and first_scripts[1][0] is None  # the two ways were taken
    seen = {"ahead": probe_of(ahead), "late": probe_of(late)}
    for name, run in (("ahead", ahead), ("late", late)):
        ids = get_sandbox(run_id=run.pk).ids or (os.getuid(), os.getgid())
        probe = seen[name]
        assert probe["ids"][:2] == list(ids), (name, probe["ids"])
        # Each run has its own uid: as owners, the sandbox user and root.
        probe["files"] = {
            path: [mode, uid == ids[0], gid == ids[1]] for path, (mode, uid, gid) in probe["files"].items()
        }
        del probe["ids"][:2]
    assert seen["ahead"] == seen["late"]
    probe = seen["ahead"]
    assert probe["writable"] and not probe["read_only"]
    assert any(m[0] == "/workspace/data.txt" and "ro" in m[1].split(",") for m in probe["mounts"]), probe["mounts"]


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_agent_runs_no_script_ends_the_sandbox_started_for_it(tiny_task_ready, settings, launched):
    settings.BENCH_SANDBOX_PERSISTENT = True
    script = [act("List Files", dir_path="."), act("Final Answer", final_answer="done")]
    run = run_create(task=tiny_task_ready.task, agent=AgentFactory(config={"script": script}), enqueue=False)
    before = own_groups()

    run = run_execute(run.pk)

    assert run.status == Run.Status.FINISHED, run.error
    boxes, _ = launched
    assert len(boxes) == 1 and ended(boxes[0])
    assert own_groups() == before


# The agent's first attempt waits before any action (as for a slow first model call); a later attempt goes on.
WAIT_IN_FIRST_ATTEMPT = {"probe": "__import__('time').sleep(600) if start['run']['attempt'] == 1 else 0"}


@pytest.mark.django_db(transaction=True)
def test_a_run_cancelled_before_any_script_ends_the_sandbox_started_for_it(tiny_task_ready, settings, launched):
    settings.BENCH_SANDBOX_PERSISTENT = True
    script = [WAIT_IN_FIRST_ATTEMPT, act("Final Answer", final_answer="done")]
    run = run_create(task=tiny_task_ready.task, agent=AgentFactory(config={"script": script}), enqueue=False)
    before = own_groups()
    boxes, started = launched

    thread = execute_in_thread(run.pk)
    assert started.wait(60), "no sandbox was launched"
    run_cancel(run=run)
    thread.join(timeout=60)

    assert not thread.is_alive()
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED
    assert len(boxes) == 1 and ended(boxes[0])
    assert own_groups() == before


@pytest.mark.django_db(transaction=True)
def test_a_run_handed_back_before_any_script_ends_its_sandbox_and_the_next_attempt_starts_its_own_ahead(
    tiny_task_ready, settings, broker_down, launched, first_scripts
):
    settings.BENCH_SANDBOX_PERSISTENT = True
    script = [
        WAIT_IN_FIRST_ATTEMPT,
        act("Execute Script", script_name="train.py"),
        act("Final Answer", final_answer="done"),
    ]
    run = run_create(task=tiny_task_ready.task, agent=AgentFactory(config={"script": script}), enqueue=False)
    before = own_groups()
    boxes, started = launched

    thread = execute_in_thread(run.pk)
    assert started.wait(60), "no sandbox was launched"
    Run.objects.filter(pk=run.pk).update(hand_back_requested_at=timezone.now())
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
    assert len(boxes) == 1 and ended(boxes[0]) and own_groups() == before

    resumed = run_execute(run.pk)  # attempt 2, on the same worker

    assert resumed.status == Run.Status.FINISHED and resumed.attempt == 2, resumed.error
    [(running, ran_in)] = first_scripts
    assert len(boxes) == 2 and running == ran_in == boxes[1].pid
    assert ended(boxes[1]) and own_groups() == before


def test_a_sandbox_started_ahead_that_died_is_started_again_by_the_first_script(make_env):
    env = make_env({"hello.py": "print('hello')\n"})
    env.sandbox.persistent = True
    env.kept_sandbox_launch()
    launched = env._kept.proc
    os.killpg(launched.pid, signal.SIGKILL)  # before or after its supervisor said it was ready
    deadline = time.monotonic() + 10
    while launched.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)

    outcome = env.execute("Execute Script", {"script_name": "hello.py"})

    assert "hello" in outcome.observation and not outcome.error, outcome.observation
    assert "infrastructure_error" not in outcome.detail
    assert env._kept.alive and env._kept.proc.pid != launched.pid
