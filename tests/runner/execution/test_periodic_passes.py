"""The periodic passes (the reaper, the blob collector's job) are offered by every worker's heartbeat thread; the
shared counter gives each period's pass to one worker only."""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.shared_cache import counts_clear
from runner.execution import workers
from runner.execution.workers import HeartbeatThread, periodic_claim
from runner.models import Run
from tests.factories import RunFactory


@pytest.fixture(autouse=True)
def fresh_counts():
    counts_clear()
    yield
    counts_clear()


def thread(name: str) -> HeartbeatThread:
    return HeartbeatThread(name=name, queues=["q"], concurrency=1, pid=1)


@pytest.mark.django_db
def test_one_worker_claims_a_periods_pass_and_the_next_period_is_free_again(monkeypatch):
    now = [1_000_000.0]
    monkeypatch.setattr("core.shared_cache.time.time", lambda: now[0])

    assert [periodic_claim("reap-runs", 30) for _ in range(3)] == [True, False, False]
    assert periodic_claim("collect-blobs", 30)  # another pass: a claim of its own
    now[0] += 30
    assert [periodic_claim("reap-runs", 30) for _ in range(2)] == [True, False]


@pytest.mark.django_db
def test_every_workers_thread_offers_the_reaper_and_one_of_them_requeues_a_dead_workers_run(
    tiny_task, settings, monkeypatch
):
    settings.BENCH_HEARTBEAT_STALE_S = 60
    sent = []
    monkeypatch.setattr(workers, "collect_send", lambda: sent.append("collect"))
    monkeypatch.setattr("runner.execution.reaper.run_enqueue", lambda run: sent.append(run.pk))
    dead = RunFactory(
        task_version=tiny_task, status=Run.Status.RUNNING, attempt=1, heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    ran = []
    monkeypatch.setattr(workers, "reap_pass", lambda real=workers.reap_pass: (ran.append(1), real())[1])

    for worker in (thread("a@h"), thread("b@h")):  # two workers offer the pass of the same period
        worker.passes()

    assert ran == [1]  # one pass between them
    assert Run.objects.get(pk=dead.pk).status == "queued" and dead.pk in sent
    assert sent.count("collect") == 1
