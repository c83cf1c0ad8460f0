"""An uploaded log's run is recorded at once and scored by a worker's job (``imports.import_score``): it waits for its
score meanwhile, rankings leave it out until then, a scoring that fails ends the wait, and the reaper sends the
job again when it was never sent or lost (a real worker doing so: tests/integration/test_import_scoring_worker.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from core.shared_cache import counts_clear
from leaderboard.query import RankingOptions
from leaderboard.selectors import counted_runs
from runner.execution.reaper import imports_rescore
from runner.jobs import JOB_GRACE_S, import_score_time_limit_s
from runner.logs import imports
from runner.logs.imports import import_score
from runner.models import Run
from tests.brokers import use_broker
from tests.integration.conftest import REDIS_URL
from tests.runner.logs.test_log_import import write_log, zip_folder


@pytest.fixture
def log_zip(tmp_path) -> bytes:
    return zip_folder(write_log(tmp_path / "run-a"), tmp_path / "run-a.zip").read_bytes()


@pytest.fixture(autouse=True)
def fresh_throttle(db):
    counts_clear()  # the upload throttle counts in the shared cache
    yield
    counts_clear()


def upload(client, data: bytes) -> Run:
    response = client.post(
        "/api/v1/logs/",
        {"log": SimpleUploadedFile("run.zip", data, "application/zip"), "task": "tiny", "agent": "my-agent"},
    )
    assert response.status_code == 201, response.content
    return Run.objects.get(pk=response.json()["id"])


@pytest.mark.django_db(transaction=True)
def test_an_uploaded_run_waits_for_its_score_until_its_job_scores_it_once(tiny_task_ready, log_zip, client, people):
    client.force_login(people["stranger"])
    run = upload(client, log_zip)

    assert (run.final_score, run.improvement, run.eval_error) == (None, None, "")
    assert run.score_pending_since is not None
    assert client.get(f"/api/v1/runs/{run.pk}/").json()["score_pending"] is True
    assert b"waiting to be scored in the sandbox" in client.get(f"/runs/{run.pk}/").content
    assert b">scoring</span>" in client.get("/runs/").content

    scored = import_score(run.pk)

    assert (scored.final_score, scored.score_pending_since, scored.eval_error) == (7.0, None, "")
    body = client.get(f"/api/v1/runs/{run.pk}/").json()
    assert (body["score_pending"], body["final_score"]) == (False, 7.0)
    assert b'id="final-score">7.0000' in client.get(f"/runs/{run.pk}/").content
    # A second job for the run (the reaper sent one again) changes nothing.
    Run.objects.filter(pk=run.pk).update(final_score=8.0)
    assert import_score(run.pk).final_score == 8.0
    assert import_score(run.pk + 1000) is None  # a run deleted since: nothing to do


@pytest.mark.django_db(transaction=True)
def test_rankings_leave_an_uploaded_run_out_until_it_is_scored(tiny_task_ready, log_zip, client, people):
    client.force_login(people["stranger"])
    run = upload(client, log_zip)
    with_self_reported = RankingOptions(include_self_reported=True)

    def counted() -> list[int]:
        runs, counted = counted_runs(viewer=None, options=with_self_reported)
        return list(runs.filter(counted).values_list("pk", flat=True))

    assert counted() == []
    import_score(run.pk)
    assert counted() == [run.pk]


@pytest.mark.django_db(transaction=True)
def test_a_scoring_that_fails_is_the_runs_evaluation_error_and_ends_the_wait(
    tiny_task_ready, log_zip, client, people, monkeypatch
):
    client.force_login(people["stranger"])
    run = upload(client, log_zip)

    def out_of_time(*args, **kwargs):
        raise SoftTimeLimitExceeded("the job's soft time limit")

    monkeypatch.setattr(imports, "_score", out_of_time)
    scored = import_score(run.pk)

    assert (scored.final_score, scored.score_pending_since, scored.succeeded) == (None, None, False)
    assert scored.eval_error.startswith("the run could not be scored: SoftTimeLimitExceeded")


@pytest.mark.django_db(transaction=True)
def test_the_reaper_sends_a_scoring_job_never_sent_or_sent_longer_ago_than_it_can_last(
    tiny_task_ready, log_zip, client, people, broker_down
):
    client.force_login(people["stranger"])
    run = upload(client, log_zip)  # the job queue is down: the upload is kept, its job not sent
    assert run.sent_at is None and run.score_pending_since is not None

    assert imports_rescore(resend_after_s=3600) == []  # not waited long enough yet
    assert imports_rescore(resend_after_s=0) == []  # the queue is still down
    use_broker(REDIS_URL)
    assert imports_rescore(resend_after_s=0) == [run.pk]
    run.refresh_from_db()
    assert run.sent_at is not None
    assert imports_rescore(resend_after_s=0) == []  # sent just now: its job may be at work

    lasted = timedelta(seconds=import_score_time_limit_s() + 2 * JOB_GRACE_S + 1)
    Run.objects.filter(pk=run.pk).update(sent_at=timezone.now() - lasted)
    assert imports_rescore(resend_after_s=0) == [run.pk]  # lost: it would have ended by now

    import_score(run.pk)
    Run.objects.filter(pk=run.pk).update(sent_at=timezone.now() - lasted)
    assert imports_rescore(resend_after_s=0) == []  # scored: nothing waits
