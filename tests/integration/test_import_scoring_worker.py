"""Uploaded logs scored by a real worker: one upload's job sent at once, another's sent by the reaper because the
job queue was down when it was uploaded (the upload itself still succeeded)."""

import pytest

from core.shared_cache import counts_clear
from runner.execution.reaper import imports_rescore
from runner.models import Run
from tests.brokers import closed_port_url, use_broker
from tests.integration.conftest import start_worker, stop_worker
from tests.runner.logs.test_import_scoring import upload
from tests.runner.logs.test_log_import import write_log, zip_folder
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def test_a_worker_scores_an_upload_and_one_whose_job_the_reaper_sent(
    worker_env, tiny_task_ready, client, people, tmp_path
):
    counts_clear()  # the upload throttle's counts
    log_zip = zip_folder(write_log(tmp_path / "run-a"), tmp_path / "run-a.zip").read_bytes()
    client.force_login(people["stranger"])
    use_broker(closed_port_url())
    try:
        missed = upload(client, log_zip)
    finally:
        use_broker(worker_env["CELERY_BROKER_URL"])
    assert missed.sent_at is None

    # A worker serving only the agent runs' queue, where a CPU task's import is scored.
    worker = start_worker(worker_env, tmp_path / "worker.log", worker_env["CELERY_QUEUE"], kinds=("",))
    try:
        sent = upload(client, log_zip)
        assert imports_rescore(resend_after_s=0) == [missed.pk]
        waiting = Run.objects.filter(score_pending_since__isnull=False)
        wait_for(lambda: not waiting.exists(), 240, "both runs to be scored")
    finally:
        stop_worker(worker)

    for run in (missed, sent):
        run.refresh_from_db()
        assert (run.score_pending_since, run.final_score, run.eval_error) == (None, 7.0, ""), run.pk
    assert b"runner.score_import" in (tmp_path / "worker.log").read_bytes()
