"""The run queue: runs start in the order they were queued, show their place in the queue, and a message the
job queue lost is sent again (the database is the queue; a message only wakes a worker)."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from bench.celery import app as celery_app
from runner.execution import run_claim, run_claim_next
from runner.execution.reaper import runs_resend
from runner.jobs import messages_waiting
from runner.models import Run
from runner.selectors import queue_positions_fill, runs_list
from runner.services import run_create, run_fork
from tests.brokers import use_broker
from tests.factories import AgentFactory, RunFactory, StepFactory
from tests.integration.conftest import REDIS_URL

pytestmark = pytest.mark.django_db


@pytest.fixture
def redis_queue(celery_test_queue):
    """This test session's queue on Redis, empty: as after a Redis restart that lost its messages."""
    old = celery_app.conf.broker_url
    use_broker(REDIS_URL)
    with celery_app.connection_for_write() as connection:
        connection.default_channel.queue_purge(celery_test_queue)
    yield celery_test_queue
    with celery_app.connection_for_write() as connection:
        connection.default_channel.queue_purge(celery_test_queue)
    use_broker(old)


def queued(tiny_task, n: int) -> list[Run]:
    agent = AgentFactory()
    return [RunFactory(task_version=tiny_task, agent=agent, status=Run.Status.QUEUED) for _ in range(n)]


def test_runs_start_in_the_order_they_were_queued_and_a_fork_waits_its_turn(tiny_task):
    first, second, third = queued(tiny_task, 3)
    StepFactory(run=first, index=0)
    fork = run_fork(run=first, step_index=0)  # queued last, sent like any other run
    Run.objects.filter(pk=first.pk).update(status=Run.Status.FINISHED)

    assert [run_claim_next(worker="w").pk for _ in range(3)] == [second.pk, third.pk, fork.pk]
    assert run_claim_next(worker="w") is None  # a message that finds nothing queued does nothing


def test_a_resumed_run_keeps_its_place_ahead_of_runs_queued_after_it(tiny_task):
    early, late = queued(tiny_task, 2)
    Run.objects.filter(pk=early.pk).update(status=Run.Status.RUNNING, attempt=1)
    assert run_claim_next(worker="w").pk == late.pk
    Run.objects.filter(pk=late.pk).update(status=Run.Status.QUEUED)  # both wait again, e.g. their workers died
    Run.objects.filter(pk=early.pk).update(status=Run.Status.QUEUED)

    assert run_claim_next(worker="w").pk == early.pk


def test_a_claim_skips_a_run_another_worker_is_claiming_and_never_claims_one_twice(tiny_task):
    (run,) = queued(tiny_task, 1)
    claimed = run_claim(run.pk, worker="a")
    assert claimed.status == Run.Status.PREPARING and claimed.attempt == 1 and claimed.worker == "a"
    assert run_claim(run.pk, worker="b") is None
    assert run_claim_next(worker="b") is None


def _hold_queued_rows(locked: threading.Event, release: threading.Event) -> None:
    """What ``jobs.runs_send`` does right after sending the runs' messages: record when, in an UPDATE that holds
    the queued rows locked until it commits (here, until released)."""
    try:
        with transaction.atomic():
            Run.objects.filter(status=Run.Status.QUEUED).update(sent_at=timezone.now())
            locked.set()
            release.wait(10)
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_message_that_arrives_while_a_writer_holds_the_queued_runs_waits_and_claims_the_first(tiny_task):
    first, second = queued(tiny_task, 2)
    locked, release = threading.Event(), threading.Event()
    writer = threading.Thread(target=_hold_queued_rows, args=(locked, release))
    writer.start()
    assert locked.wait(10)
    threading.Timer(0.3, release.set).start()

    claimed = run_claim_next(worker="w")  # SKIP LOCKED alone skipped both and found "nothing queued"
    writer.join()

    assert claimed is not None and claimed.pk == first.pk
    assert run_claim(second.pk, worker="w").pk == second.pk
    assert run_claim_next(worker="w") is None  # nothing queued: no wait


def test_a_resumed_run_does_not_count_the_time_it_spent_off_a_worker(tiny_task):
    (run,) = queued(tiny_task, 1)
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        attempt=1, started_at=now - timedelta(seconds=100), heartbeat_at=now - timedelta(seconds=90)
    )
    claimed = run_claim(run.pk, worker="w")
    assert 90 <= claimed.paused_seconds < 120
    assert claimed.started_at == now - timedelta(seconds=100)  # kept: the run started then
    fresh = run_claim(queued(tiny_task, 1)[0].pk, worker="w")
    assert fresh.paused_seconds == 0


def test_queued_runs_show_their_place_in_the_queue(client, tiny_task):
    first, second, third = queued(tiny_task, 3)
    Run.objects.filter(pk=first.pk).update(status=Run.Status.RUNNING)
    positions = {run.pk: run.queue_position for run in queue_positions_fill(list(runs_list(viewer=None)))}
    assert positions == {first.pk: None, second.pk: 1, third.pk: 2}

    answer = client.get(f"/api/v1/runs/{third.pk}/").json()
    assert answer["queue_position"] == 2
    assert "#2 in queue" in client.get(f"/runs/{third.pk}/").content.decode()
    assert "#1 in queue" in client.get("/runs/").content.decode()


def test_a_run_waits_only_behind_runs_of_its_kind(client, tiny_task):
    """A GPU worker claims only GPU runs and a CPU worker only the others: each kind's places are counted apart."""
    gpu, cpu, gpu_after, cpu_after = queued(tiny_task, 4)
    Run.objects.filter(pk__in=[gpu.pk, gpu_after.pk]).update(queue=Run.Queue.GPU)
    positions = {run.pk: run.queue_position for run in queue_positions_fill(list(runs_list(viewer=None)))}
    assert positions == {gpu.pk: 1, cpu.pk: 1, gpu_after.pk: 2, cpu_after.pk: 2}
    assert [client.get(f"/api/v1/runs/{run.pk}/").json()["queue_position"] for run in (cpu, gpu_after)] == [1, 2]


def test_a_page_counts_its_runs_places_in_one_query_with_runs_it_does_not_list_in_between(
    client, tiny_task, tmp_path, django_assert_num_queries
):
    """Places count every queued run ahead (of other tasks and hidden ones too; a started one not), and a list asks
    the database once for the whole page's places, however many queued runs it shows or wait ahead of them."""
    from task_bank.services import task_import
    from tests.factories import TINY_FILES, package_write

    other, _ = task_import(root=package_write(tmp_path / "other", TINY_FILES), slug="other")
    listed, hidden = AgentFactory(name="listed"), AgentFactory(name="hidden", visibility="private")
    # In queue order: tiny, other (a hidden agent's), tiny, other, ...; the fifth one has started.
    runs = [
        RunFactory(task_version=version, agent=agent, status=Run.Status.QUEUED)
        for version, agent in [(tiny_task, listed), (other, hidden)] * 6
    ]
    Run.objects.filter(pk=runs[4].pk).update(status=Run.Status.RUNNING)

    with django_assert_num_queries(2):  # the page's runs, their places
        page = client.get("/runs/?task=tiny&status=queued").context["page"]
    assert [run.pk for run in page.runs] == [run.pk for run in runs[10::-2] if run.pk != runs[4].pk]
    assert [run.queue_position for run in page.runs] == [10, 8, 6, 3, 1]
    with django_assert_num_queries(3):  # the count, the page's runs, their places
        answer = client.get("/api/v1/runs/?task=tiny").json()["results"]
    assert [r["queue_position"] for r in answer] == [10, 8, 6, None, 3, 1]
    with django_assert_num_queries(3):  # the run it lists from, the page's runs, their places
        answer = client.get(f"/api/v1/runs/?task=tiny&before={runs[8].pk}").json()["results"]
    assert [r["queue_position"] for r in answer] == [6, None, 3, 1]


def test_a_message_the_queue_lost_is_sent_again_once(
    tiny_task, baseline_agent, redis_queue, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        runs = [run_create(task=tiny_task.task, agent=baseline_agent) for _ in range(3)]
    assert messages_waiting() == 3
    assert runs_resend(resend_after_s=0) == []  # every queued run has its message

    with celery_app.connection_for_write() as connection:  # the broker restarts and loses them
        connection.default_channel.queue_purge(redis_queue)
    assert messages_waiting() == 0
    assert runs_resend(resend_after_s=3600) == []  # nobody has waited long enough to tell yet

    assert runs_resend(resend_after_s=0) == [run.pk for run in runs]
    assert messages_waiting() == 3
    assert runs_resend(resend_after_s=0) == []

    claimed = run_claim_next(worker="w")  # a worker takes a message and the first run; two of each are left
    with celery_app.connection_for_write() as connection:
        connection.default_channel.basic_get(redis_queue, no_ack=True)
    assert claimed.pk == runs[0].pk
    assert runs_resend(resend_after_s=0) == []
