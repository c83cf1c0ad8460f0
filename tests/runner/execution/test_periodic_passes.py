"""The periodic passes (the reaper, the blob collector's job) are offered by every worker's heartbeat thread; the
shared counter gives each period's pass to one worker only."""

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db.models.functions import Now
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
    now = [datetime(2026, 12, 6, 12, 0, 0, tzinfo=UTC)]
    monkeypatch.setattr(workers, "db_now", lambda: now[0])

    assert [periodic_claim("reap-runs", 30) for _ in range(3)] == [True, False, False]
    assert periodic_claim("collect-blobs", 30)  # another pass: a claim of its own
    now[0] += timedelta(seconds=30)
    assert [periodic_claim("reap-runs", 30) for _ in range(2)] == [True, False]


@pytest.mark.django_db
def test_workers_whose_clocks_differ_claim_a_periods_pass_once(monkeypatch):
    real_time = time.time
    claims = []
    for skew_s in (0, 70, -70):  # three workers, each clock more than a window (60 s) from the others
        monkeypatch.setattr("core.shared_cache.time.time", lambda skew_s=skew_s: real_time() + skew_s)
        claims.append(periodic_claim("reap-runs", 60))
    assert claims.count(True) == 1


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


@pytest.mark.django_db
def test_one_worker_on_each_host_sweeps_that_hosts_scratch(monkeypatch):
    monkeypatch.setattr(workers, "reap_pass", lambda: None)
    monkeypatch.setattr(workers, "collect_send", lambda: None)
    swept = []
    monkeypatch.setattr("runner.execution.reaper.scratch_sweep", lambda: swept.append(host[0]) or [])
    host = ["first-host"]
    monkeypatch.setattr(workers.socket, "gethostname", lambda: host[0])

    for worker in (thread("a@first"), thread("b@first")):
        worker.passes()
    host[0] = "second-host"  # the reaper's pass of this period is taken; this host's disk is swept all the same
    thread("c@second").passes()

    assert swept == ["first-host", "second-host"]


@pytest.mark.django_db
def test_a_reaper_whose_clock_is_ahead_takes_no_live_run_for_dead(tiny_task, settings, monkeypatch):
    # Every worker reaps now: one whose clock runs ten minutes fast must not queue every live run again.
    from runner.execution.pulse import RunPulse
    from runner.execution.reaper import runs_reap

    settings.BENCH_HEARTBEAT_STALE_S = 120
    live = RunFactory(task_version=tiny_task, status=Run.Status.RUNNING, attempt=1, heartbeat_at=None)
    RunPulse(live).write(heartbeat_at=Now())  # a beat, as a running run's worker writes it
    real_now = timezone.now
    monkeypatch.setattr("django.utils.timezone.now", lambda: real_now() + timedelta(minutes=10))

    assert runs_reap()["requeued"] == []
    assert Run.objects.get(pk=live.pk).status == "running"
