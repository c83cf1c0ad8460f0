"""A worker killed (SIGKILL) in the middle of a run: another worker's periodic reaper re-queues the run, the new
attempt resumes from the last committed step, and every step is recorded exactly once. No worker is special: the
one killed ran the periodic passes as much as the one left."""

import os
import signal

import pytest

from runner.models import Run, Step
from runner.services import run_create
from tests.factories import AgentFactory
from tests.integration.conftest import start_worker, stop_worker
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

SLOW = "import time\ntime.sleep(1.5)\nprint('slept')\n"


def act(action: str, **args) -> dict:
    return {"type": "act", "action": action, "input": args}


def test_a_run_survives_its_worker_being_killed(worker_env, celery_test_queue, tiny_task, tmp_path):
    script = [act("Write File", file_name="slow.py", content=SLOW)]
    script += [act("Execute Script", script_name="slow.py") for _ in range(6)]
    script += [act("Write File", file_name="value.txt", content="3"), act("Final Answer", final_answer="done")]
    agent = AgentFactory(config={"script": script})
    fast = dict(worker_env, BENCH_HEARTBEAT_S="0.5", BENCH_HEARTBEAT_STALE_S="4", BENCH_REAPER_EVERY_S="1")

    first = start_worker(fast, tmp_path / "first.log", celery_test_queue)
    run = run_create(task=tiny_task.task, agent=agent)
    second = None
    try:
        wait_for(lambda: Run.objects.get(pk=run.pk).steps_count >= 3, 120, "three steps")
        second = start_worker(fast, tmp_path / "second.log", celery_test_queue)  # idle beside the first
        assert Run.objects.get(pk=run.pk).worker.startswith(f"test-{os.getpid()}-first@")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    finally:
        stop_worker(first)
    killed_at_steps = Run.objects.get(pk=run.pk).steps_count
    assert Run.objects.get(pk=run.pk).status == "running"

    try:
        wait_for(lambda: Run.objects.get(pk=run.pk).has_ended, 180, "the run to end")
    finally:
        if second is not None:
            stop_worker(second)

    run.refresh_from_db()
    assert run.status == "finished", (run.error, run.stderr_tail)
    assert run.attempt == 2
    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert [s.index for s in steps] == list(range(len(script)))
    assert [s.action for s in steps] == [item["action"] for item in script]
    assert killed_at_steps < len(script)
    assert f"started with {killed_at_steps} earlier steps" in run.stderr_tail
    assert run.final_score == 3.0
