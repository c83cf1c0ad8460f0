"""/metrics: the platform's state in Prometheus's text format, for staff or a scraper with the token."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from runner.models import LLMCall, Run, Worker
from tests.factories import RunFactory

URL = "/metrics"


def samples(text: str) -> dict[tuple, float]:
    """{(sample name, sorted labels): value} of an exposition."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


@pytest.mark.django_db
def test_only_staff_or_the_scrapers_token_may_read_it(client, settings):
    settings.BENCH_METRICS_TOKEN = "s3cret-token"
    assert client.get(URL).status_code == 403
    assert client.get(URL, headers={"Authorization": "Bearer wrong"}).status_code == 403
    assert client.get(URL, headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
    settings.BENCH_METRICS_TOKEN = ""
    assert client.get(URL, headers={"Authorization": "Bearer "}).status_code == 403  # no token set: none matches
    user = get_user_model().objects.create_user("someone", password="pw-for-a-test-1")
    client.force_login(user)
    assert client.get(URL).status_code == 403
    user.is_staff = True
    user.save()
    assert client.get(URL).status_code == 200


@pytest.mark.django_db
def test_the_runs_queues_failures_model_spend_and_workers_are_read_from_the_database(client, tiny_task, settings):
    settings.BENCH_METRICS_TOKEN = "t"
    now = timezone.now()
    RunFactory(task_version=tiny_task, status=Run.Status.QUEUED)
    oldest = RunFactory(task_version=tiny_task, status=Run.Status.QUEUED)
    Run.objects.filter(pk=oldest.pk).update(created_at=now - timedelta(minutes=10), heartbeat_at=None)
    # Handed back five minutes ago, created two days ago: it waits since it was handed back.
    handed_back = RunFactory(task_version=tiny_task, status=Run.Status.QUEUED)
    Run.objects.filter(pk=handed_back.pk).update(
        created_at=now - timedelta(days=2), heartbeat_at=now - timedelta(minutes=5)
    )
    for kind in ("agent", "agent", "infrastructure"):
        RunFactory(task_version=tiny_task, status=Run.Status.FAILED, failure_kind=kind)
    done = RunFactory(
        task_version=tiny_task, status=Run.Status.FINISHED, steps_count=7,
        started_at=now - timedelta(seconds=90), finished_at=now, wall_seconds=80,  # 10 s off a worker
    )  # fmt: skip
    LLMCall.objects.create(run=done, step_index=0, endpoint="e", model="m-1", tokens_in=100, tokens_out=20,
                           cost=Decimal("0.5"), latency_s=1.5)  # fmt: skip
    LLMCall.objects.create(run=done, step_index=1, endpoint="e", model="m-1", tokens_in=50, tokens_out=5,
                           cost=Decimal("0.25"), latency_s=0.5)  # fmt: skip
    for asked in ("made-up-1", "made-up-2"):  # models no endpoint serves: refused, no series of their own
        LLMCall.objects.create(run=done, step_index=2, endpoint="", model=asked, error="refused")
    Worker.objects.create(name="w1@h", queues=["bench"], pid=1, concurrency=1, started_at=now,
                          heartbeat_at=now - timedelta(seconds=42))  # fmt: skip

    response = client.get(URL, headers={"Authorization": "Bearer t"})
    assert response["Content-Type"].startswith("text/plain; version=")
    got = samples(response.content.decode())

    assert got[("bench_runs", (("queue", "runs"), ("status", "queued")))] == 3
    assert got[("bench_runs", (("queue", "runs"), ("status", "failed")))] == 3
    assert 600 <= got[("bench_queue_oldest_seconds", (("queue", "runs"),))] < 3600  # the oldest, in seconds
    assert got[("bench_run_failures_total", (("kind", "agent"),))] == 2
    assert got[("bench_run_failures_total", (("kind", "infrastructure"),))] == 1
    assert got[("bench_run_duration_seconds_count", (("status", "finished"),))] == 1
    assert got[("bench_run_duration_seconds_sum", (("status", "finished"),))] == pytest.approx(80)
    assert got[("bench_steps_total", ())] == 7
    assert got[("bench_model_calls_total", (("model", "m-1"),))] == 2
    assert got[("bench_model_calls_total", (("model", "(refused)"),))] == 2
    assert not [labels for name, labels in got if ("model", "made-up-1") in labels]
    assert got[("bench_model_call_seconds_total", (("model", "m-1"),))] == pytest.approx(2.0)
    assert got[("bench_model_tokens_total", (("direction", "in"), ("model", "m-1")))] == 150
    assert got[("bench_model_spend_total", (("model", "m-1"),))] == pytest.approx(0.75)
    assert 42 <= got[("bench_worker_heartbeat_age_seconds", (("queues", "bench"), ("worker", "w1@h")))] < 3600
    # django-prometheus's request metrics come along.
    assert any(name.startswith("django_http_requests") for name, _ in got)
