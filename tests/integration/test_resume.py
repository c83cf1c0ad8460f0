"""Runs that go on where they stopped, with real workers on Redis and PostgreSQL: a run whose worker is killed
while evaluating is evaluated once more, not conversed with again; a worker told to stop (SIGTERM) hands its
run back and exits, and another worker resumes it; a run whose database connections are cut goes on; a message the
broker lost is sent again by the reaper."""

import os
import signal
import subprocess
import time

import pytest

from bench.celery import app as celery_app
from runner.models import Run, Step
from runner.services import run_create
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, package_write
from tests.integration.conftest import start_worker, stop_worker
from tests.integration.test_worker_killed import SLOW, act, wait_for

pytestmark = pytest.mark.integration

FAST = {"BENCH_HEARTBEAT_S": "0.5", "BENCH_HEARTBEAT_STALE_S": "4", "BENCH_REAPER_EVERY_S": "1"}

# eval.py takes a few seconds: long enough to kill the worker while it runs.
SLOW_EVAL = """
import os, time

def get_score(submission_folder="../env"):
    time.sleep(4)
    with open(os.path.join(submission_folder, "value.txt")) as fh:
        return float(fh.read())
"""


def test_a_worker_killed_while_evaluating_leaves_one_final_answer_and_one_evaluation(
    worker_env, celery_test_queue, tmp_path, bench_var
):
    version, _ = task_import(root=package_write(tmp_path / "slow-eval", {**TINY_FILES, "scripts/eval.py": SLOW_EVAL}))
    script = [act("Write File", file_name="value.txt", content="3"), act("Final Answer", final_answer="done")]
    agent = AgentFactory(config={"script": script})
    env = dict(worker_env, **FAST)
    run = run_create(task=version.task, agent=agent, version=version)
    run_dir = bench_var / "runs" / str(run.pk)

    first = start_worker(env, tmp_path / "first.log", celery_test_queue)
    try:
        evaluating = Run.objects.filter(pk=run.pk, attempt=1, status="evaluating")
        wait_for(evaluating.exists, 300, "the evaluation")  # after the task's own validation
        wait_for(lambda: list(run_dir.glob("eval-1-*")), 60, "the first attempt's evaluation folder")
        os.killpg(first.pid, signal.SIGKILL)  # the worker, the child running the run and the evaluation
        first.wait()
    finally:
        stop_worker(first)

    second = start_worker(env, tmp_path / "second.log", celery_test_queue)
    try:
        wait_for(lambda: Run.objects.get(pk=run.pk).has_ended, 300, "the run to end")
    finally:
        stop_worker(second)

    run.refresh_from_db()
    assert (run.status, run.attempt, run.final_score) == ("finished", 2, 3.0), (run.error, run.eval_error)
    assert [s.action for s in Step.objects.filter(run=run).order_by("index")] == ["Write File", "Final Answer"]
    assert (run_dir / "agent-1.stderr.log").exists()
    assert not (run_dir / "agent-2.stderr.log").exists()  # the agent was not started again
    assert not list(run_dir.glob("eval-*")) and not list(run_dir.glob("workspace-*"))  # nothing left behind


def test_a_worker_told_to_stop_hands_its_run_back_and_another_resumes_it(
    worker_env, celery_test_queue, tiny_task, tmp_path, client
):
    script = [act("Write File", file_name="slow.py", content=SLOW.replace("1.5", "3"))]
    script += [act("Execute Script", script_name="slow.py") for _ in range(4)]
    script += [act("Write File", file_name="value.txt", content="3"), act("Final Answer", final_answer="done")]
    agent = AgentFactory(config={"script": script})
    env = dict(worker_env, **FAST)

    first = start_worker(env, tmp_path / "first.log", celery_test_queue)
    run = run_create(task=tiny_task.task, agent=agent)
    try:
        wait_for(lambda: Run.objects.get(pk=run.pk).live_action == "Execute Script", 120, "a script running")
        first.send_signal(signal.SIGTERM)
        try:
            first.wait(timeout=60)  # a hang here is the bug: the worker must stop once its run is handed back
        except subprocess.TimeoutExpired:
            pytest.fail(f"the worker did not stop on SIGTERM:\n{(tmp_path / 'first.log').read_text()[-3000:]}")
    finally:
        stop_worker(first)
    run.refresh_from_db()
    assert (run.status, run.attempt, run.worker) == ("queued", 1, ""), run.error
    assert run.lost_attempts == 0  # a clean stop (a deploy, Ctrl-C) loses the run no attempt
    handed_back_at = run.steps_count
    assert 1 <= handed_back_at < len(script)

    second = start_worker(env, tmp_path / "second.log", celery_test_queue)
    try:
        wait_for(lambda: Run.objects.get(pk=run.pk).has_ended, 180, "the run to end")
    finally:
        stop_worker(second)
    run.refresh_from_db()
    assert (run.status, run.attempt, run.final_score) == ("finished", 2, 3.0), (run.error, run.stderr_tail)
    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert [s.action for s in steps] == [item["action"] for item in script]  # the interrupted action, done again
    assert [s.attempt for s in steps] == [1] * handed_back_at + [2] * (len(script) - handed_back_at)
    assert f"started with {handed_back_at} earlier steps" in run.stderr_tail
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert f"stopped after step {handed_back_at - 1}; attempt 2 resumed it" in page


def cut_connections() -> int:
    """Cut every other connection to this test's database, as a restart or failover does (ours stays)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def test_a_run_whose_database_connections_are_cut_goes_on_and_loses_no_time(
    worker_env, celery_test_queue, tiny_task, tmp_path
):
    script = [act("Write File", file_name="slow.py", content=SLOW)]
    script += [act("Execute Script", script_name="slow.py") for _ in range(6)]
    script += [act("Write File", file_name="value.txt", content="3"), act("Final Answer", final_answer="done")]
    agent = AgentFactory(config={"script": script})
    # No reaper can save it: a stale heartbeat would take ten minutes.
    env = dict(worker_env, BENCH_HEARTBEAT_S="0.5", BENCH_HEARTBEAT_STALE_S="600")
    log = tmp_path / "worker.log"
    worker = start_worker(env, log, celery_test_queue)
    run = run_create(task=tiny_task.task, agent=agent)
    try:
        wait_for(lambda: Run.objects.get(pk=run.pk).steps_count >= 2, 120, "two steps")
        for _ in range(3):  # three cuts, a few seconds apart, while scripts run and steps are written
            cut_connections()
            time.sleep(2)
        # Well before the stale limit (600 s): the run is not waiting for the reaper.
        wait_for(lambda: Run.objects.get(pk=run.pk).has_ended, 300, "the run to end")
    finally:
        stop_worker(worker)
    run.refresh_from_db()
    assert (run.status, run.final_score) == ("finished", 3.0), (run.error, log.read_text()[-3000:])
    assert run.lost_attempts <= 1 and run.attempt == 1 + run.lost_attempts  # no attempt lost but to a cut write
    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert [s.action for s in steps] == [item["action"] for item in script]  # each once
    assert "the database connection was lost" in log.read_text()  # it was cut, and tried again on a new one


def test_a_queued_run_whose_message_the_broker_lost_still_runs(
    worker_env, celery_test_queue, tiny_task, tmp_path, baseline_agent
):
    run = run_create(task=tiny_task.task, agent=baseline_agent)
    wait_for(lambda: Run.objects.get(pk=run.pk).sent_at, 30, "the run to be sent")
    with celery_app.connection_for_write() as connection:  # Redis restarted: the message is gone
        connection.default_channel.queue_purge(celery_test_queue)

    env = dict(worker_env, **FAST, BENCH_RESEND_AFTER_S="1")
    worker = start_worker(env, tmp_path / "worker.log", celery_test_queue)
    try:
        wait_for(lambda: Run.objects.get(pk=run.pk).has_ended, 300, "the run to end")
    finally:
        stop_worker(worker)
    run.refresh_from_db()
    assert run.status == "finished", (run.error, (tmp_path / "worker.log").read_text()[-2000:])
