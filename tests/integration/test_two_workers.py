"""Scale-out: two worker processes on PostgreSQL and Redis share one batch. Every run is claimed and executed
exactly once (attempt 1, one set of steps, its end recorded once), none is lost, all end; and a worker killed
with SIGKILL in the middle of the batch loses only its own run for a while: the other worker's reaper queues it
again, it finishes, and nothing in the batch is counted twice."""

import os
import re
import signal
from collections import Counter
from pathlib import Path

import pytest
from django.db.models import Count, Sum

from runner.models import Run, RunSpec, Step
from runner.services import batch_create
from tests.factories import AgentFactory, validate_now
from tests.integration.conftest import start_worker, stop_worker
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

RUNS = 20
WORK = "total = sum(i * i for i in range(20000))\nprint('work done', total)\n"


def act(action: str, **args) -> dict:
    return {"type": "act", "action": action, "input": args}


def short_run_script(*, executions: int = 1, script: str = WORK) -> list[dict]:
    """A short run: write a script, execute it, leave value.txt (the tiny task's score: 3) and answer."""
    steps = [act("Write File", file_name="work.py", content=script)]
    steps += [act("Execute Script", script_name="work.py") for _ in range(executions)]
    return steps + [act("Write File", file_name="value.txt", content="3"), act("Final Answer", final_answer="done")]


def validated(version):
    """Measure the task's baseline here and now, so a batch holds only its own runs."""
    validate_now(version)
    version.refresh_from_db()
    assert version.status == "ready", (version.status, version.baseline_scores)
    return version


def ends_logged(*logs: Path) -> Counter:
    """How many times each run's end was recorded, from the workers' logs ("run N ended ...")."""
    ended: Counter = Counter()
    for log in logs:
        ended.update(int(n) for n in re.findall(rb"run (\d+) ended ", log.read_bytes()))
    return ended


def assert_executed_once_each(runs: list[Run], script: list[dict], *, attempts: dict[int, int]) -> None:
    """Every run finished with the score its script leaves, with one step per script entry, indexes 0..n-1,
    and the run's counters equal to what its steps add up to."""
    for run in runs:
        run.refresh_from_db()
        assert run.status == "finished", (run.pk, run.status, run.error, run.stderr_tail[-2000:])
        assert run.attempt == attempts.get(run.pk, 1), (run.pk, run.attempt)
        assert run.final_score == 3.0, (run.pk, run.final_score, run.eval_error)
        steps = list(Step.objects.filter(run=run).order_by("index").values_list("index", "action"))
        assert steps == [(i, item["action"]) for i, item in enumerate(script)], run.pk
        assert run.steps_count == len(script), (run.pk, run.steps_count)
    totals = Step.objects.filter(run__in=runs).aggregate(steps=Count("pk"))
    assert totals["steps"] == len(runs) * len(script)
    assert Run.objects.filter(pk__in=[r.pk for r in runs]).aggregate(n=Sum("steps_count"))["n"] == totals["steps"]


@pytest.mark.timeout(600)  # twenty runs on two workers: under a minute alone, minutes on a busy machine
def test_two_workers_run_a_batch_of_twenty_each_exactly_once(worker_env, celery_test_queue, tiny_task, tmp_path):
    validated(tiny_task)
    script = short_run_script()
    agent = AgentFactory(config={"script": script})
    logs = [tmp_path / "one.log", tmp_path / "two.log"]
    workers = [start_worker(worker_env, log, celery_test_queue) for log in logs]
    try:
        batch, runs = batch_create(spec=RunSpec(agent), tasks=[tiny_task.task], repeats=RUNS)
        wait_for(
            lambda: not Run.objects.live().filter(batch=batch).exists(),
            540,
            "every run of the batch to end",
        )
    finally:
        for worker in workers:
            stop_worker(worker)

    assert Run.objects.filter(batch=batch).count() == RUNS
    assert_executed_once_each(runs, script, attempts={})
    assert not Step.objects.filter(run__batch=batch).exclude(attempt=1).exists()
    # Each run's end was recorded once, by one of the two workers, and both workers took a share of the batch.
    assert ends_logged(*logs) == Counter({run.pk: 1 for run in runs})
    by_worker = Counter(Run.objects.filter(batch=batch).values_list("worker", flat=True))
    assert len(by_worker) == 2, by_worker
    assert all(name.startswith("test-") for name in by_worker), by_worker


@pytest.mark.timeout(600)
def test_a_worker_killed_mid_batch_loses_nothing_and_counts_nothing_twice(
    worker_env, celery_test_queue, tiny_task, tmp_path
):
    validated(tiny_task)
    slow = "import time\ntime.sleep(1)\nprint('slept')\n"
    script = short_run_script(executions=4, script=slow)
    agent = AgentFactory(config={"script": script})
    fast = dict(worker_env, BENCH_HEARTBEAT_S="0.5", BENCH_HEARTBEAT_STALE_S="4", BENCH_REAPER_EVERY_S="1")
    # Both offer the periodic reaper; whichever takes a period's pass, the survivor's passes go on.
    survivor_log, victim_log = tmp_path / "survivor.log", tmp_path / "victim.log"
    survivor = start_worker(fast, survivor_log, celery_test_queue)
    victim = start_worker(fast, victim_log, celery_test_queue)
    try:
        batch, runs = batch_create(spec=RunSpec(agent), tasks=[tiny_task.task], repeats=6)
        victim_name = f"test-{os.getpid()}-victim@"

        def victim_run_midway() -> Run | None:
            live = Run.objects.filter(batch=batch, status="running", worker__startswith=victim_name)
            return live.filter(steps_count__gte=2).first()

        killed = wait_for(victim_run_midway, 300, "the victim worker to be midway through a run")
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        killed_at_steps = Run.objects.get(pk=killed.pk).steps_count
        assert Run.objects.get(pk=killed.pk).status == "running"  # nobody else will end it but the reaper
        wait_for(
            lambda: not Run.objects.live().filter(batch=batch).exists(),
            540,
            "every run of the batch to end",
        )
    finally:
        stop_worker(victim)
        stop_worker(survivor)

    killed.refresh_from_db()
    assert killed.worker.startswith(f"test-{os.getpid()}-survivor@"), killed.worker
    assert f"started with {killed_at_steps} earlier steps" in killed.stderr_tail
    assert_executed_once_each(runs, script, attempts={killed.pk: 2})
    # The killed run's steps: those recorded before the kill by attempt 1, the rest by attempt 2, none twice.
    attempts = list(Step.objects.filter(run=killed).order_by("index").values_list("attempt", flat=True))
    assert attempts == [1] * killed_at_steps + [2] * (len(script) - killed_at_steps)
    # The victim recorded the ends of the runs it finished before the kill, the survivor every other end: once each.
    assert ends_logged(survivor_log, victim_log) == Counter({run.pk: 1 for run in runs})
    assert killed.pk not in ends_logged(victim_log)
