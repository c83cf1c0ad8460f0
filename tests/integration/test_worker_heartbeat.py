"""A real worker records its heartbeat and the runs it holds; killed, it stays on the page as lost; stopped, as
stopped."""

import os
import signal
import time

import pytest

from runner.execution.reaper import scratch_sweep
from runner.models import Run, Worker
from runner.services import run_create
from tests.factories import AgentFactory
from tests.integration.conftest import start_worker, stop_worker
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

SLOW = "import time\ntime.sleep(30)\n"


def worker_row() -> Worker | None:
    return Worker.objects.filter(name__startswith=f"test-{os.getpid()}-worker@").first()


def test_a_worker_s_heartbeat_and_runs_show_until_it_is_killed(
    worker_env, celery_test_queue, tiny_task, tmp_path, client, people, settings
):
    env = dict(worker_env, BENCH_WORKER_HEARTBEAT_S="0.3")
    proc = start_worker(env, tmp_path / "worker.log", celery_test_queue)
    try:
        row = wait_for(
            lambda: Worker.objects.filter(name__startswith=f"test-{os.getpid()}-worker@").first(), 30, "a row"
        )
        assert row.queues == sorted([celery_test_queue, f"{celery_test_queue}-gpu", f"{celery_test_queue}-short"])
        script = [{"type": "act", "action": "Write File", "input": {"file_name": "s.py", "content": SLOW}}]
        script += [{"type": "act", "action": "Execute Script", "input": {"script_name": "s.py"}}]
        run = run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}))
        wait_for(lambda: Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).exists(), 120, "the run to start")
        beat = Worker.objects.get(pk=row.pk).heartbeat_at
        wait_for(lambda: Worker.objects.get(pk=row.pk).heartbeat_at > beat, 10, "a later heartbeat")

        client.force_login(people["staff"])
        views = {v.worker.name: v for v in client.get("/workers/").context["workers"]}
        assert views[row.name].state == "alive" and run.pk in [r.pk for r in views[row.name].runs]

        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        stop_worker(proc)
    try:
        last = Worker.objects.get(pk=row.pk).heartbeat_at
        time.sleep(1.0)
        assert Worker.objects.get(pk=row.pk).heartbeat_at == last  # nothing beats for a dead worker
        settings.BENCH_HEARTBEAT_STALE_S = 0.5
        views = {v.worker.name: v for v in client.get("/workers/").context["workers"]}
        assert views[row.name].state == "lost" and run.pk in [r.pk for r in views[row.name].runs]
        assert "lost" in client.get("/workers/").content.decode()
    finally:  # the killed worker's run ends here, and its workspace (mounts too) goes
        Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED)
        scratch_sweep()


def test_a_worker_that_stops_cleanly_is_shown_stopped(worker_env, celery_test_queue, tmp_path, client, people):
    proc = start_worker(dict(worker_env, BENCH_WORKER_HEARTBEAT_S="0.3"), tmp_path / "worker.log", celery_test_queue)
    try:
        row = wait_for(
            lambda: Worker.objects.filter(name__startswith=f"test-{os.getpid()}-worker@").first(), 30, "a row"
        )
    finally:
        stop_worker(proc)  # SIGTERM: a warm shutdown
    assert Worker.objects.get(pk=row.pk).stopped_at is not None
    client.force_login(people["staff"])
    views = {v.worker.name: v for v in client.get("/workers/").context["workers"]}
    assert views[row.name].state == "stopped"
