"""The workers page: staff see each worker's state, queues, last heartbeat and the runs it holds."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runner.execution.workers import worker_heartbeat, worker_stopped
from runner.models import Run, Worker
from tests.factories import AgentFactory, RunFactory

pytestmark = pytest.mark.django_db


def worker(name: str, *, beat_ago_s: float, stopped: bool = False) -> Worker:
    now = timezone.now()
    beat = now - timedelta(seconds=beat_ago_s)
    return Worker.objects.create(
        name=name,
        queues=["bench", "bench-short"],
        started_at=beat,
        heartbeat_at=beat,
        stopped_at=now if stopped else None,
    )


def test_staff_see_each_worker_s_state_and_the_runs_it_holds(client, people, tiny_task, settings):
    settings.BENCH_HEARTBEAT_STALE_S = 60
    worker("alive@a", beat_ago_s=5)
    worker("lost@b", beat_ago_s=600)
    worker("stopped@c", beat_ago_s=900, stopped=True)
    agent = AgentFactory(name="busy-bee")
    running = RunFactory(task_version=tiny_task, agent=agent, status=Run.Status.RUNNING, worker="alive@a")
    orphan = RunFactory(task_version=tiny_task, agent=agent, status=Run.Status.PREPARING, worker="lost@b")
    RunFactory(task_version=tiny_task, agent=agent, status=Run.Status.FINISHED, worker="alive@a")  # not current

    client.force_login(people["staff"])
    page = client.get("/workers/")
    assert page.status_code == 200
    rows = [(v.worker.name, v.state, [r.pk for r in v.runs]) for v in page.context["workers"]]
    assert rows == [("alive@a", "alive", [running.pk]), ("lost@b", "lost", [orphan.pk]), ("stopped@c", "stopped", [])]
    html = page.content.decode()
    assert f'href="/runs/{running.pk}/"' in html and "busy-bee on tiny" in html
    assert "bench, bench-short" in html
    assert 'href="/workers/"' in html  # the header links the page for staff


def test_the_page_reads_workers_and_runs_in_a_fixed_number_of_queries(
    client, people, tiny_task, django_assert_num_queries
):
    for i in range(5):
        worker(f"w{i}@h", beat_ago_s=1)
        RunFactory(task_version=tiny_task, status=Run.Status.RUNNING, worker=f"w{i}@h")
    client.force_login(people["staff"])
    # the session, the user, the header's pending submissions and held runs, the workers, their runs
    with django_assert_num_queries(6):
        client.get("/workers/")


@pytest.mark.parametrize("who", ["anonymous", "stranger"])
def test_only_staff_see_the_workers(client, people, who):
    worker("alive@a", beat_ago_s=1)
    if who != "anonymous":
        client.force_login(people[who])
    answer = client.get("/workers/")
    if who == "anonymous":  # to the site's sign-in, not the admin's
        assert answer.status_code == 302 and answer["Location"] == "/account/login/?next=/workers/"
    else:
        assert answer.status_code == 403
    assert 'href="/workers/"' not in client.get("/").content.decode()


def test_a_heartbeat_revives_a_stopped_worker_s_row_and_a_start_starts_it_afresh():
    worker_heartbeat(name="w@h", queues=["bench"], pid=10, concurrency=2, starting=True)
    first = Worker.objects.get(name="w@h")
    worker_stopped(name="w@h")
    assert Worker.objects.get(name="w@h").stopped_at is not None
    worker_heartbeat(name="w@h", queues=["bench-gpu"], pid=11, concurrency=1, starting=True)
    again = Worker.objects.get(name="w@h")
    assert again.stopped_at is None and again.pid == 11 and again.queues == ["bench-gpu"]
    assert again.started_at > first.started_at


def test_the_reaper_forgets_workers_not_heard_of_for_days(settings):
    from runner.execution.reaper import runs_reap

    settings.BENCH_WORKER_FORGET_AFTER_S = 3600
    worker("gone@a", beat_ago_s=7200, stopped=True)
    worker("lost@b", beat_ago_s=7200)
    worker("lost@c", beat_ago_s=600)
    assert sorted(runs_reap()["forgotten"]) == ["gone@a", "lost@b"]
    assert list(Worker.objects.values_list("name", flat=True)) == ["lost@c"]
