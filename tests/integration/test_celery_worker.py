"""The whole path on the scale-out stack: bench_run -> Redis -> a real Celery worker -> PostgreSQL, with the
worker's sandboxes in each isolating backend this machine has (docker on a real engine too)."""

import json

import pytest
from django.core.management import call_command

from runner.models import Run, Step
from tests.integration.conftest import start_worker, stop_worker
from tests.scoring import eval_score_of

pytestmark = pytest.mark.integration


def test_a_worker_runs_the_baseline_and_records_the_eval_score(backend, worker_env, digits, capsys, tmp_path, settings):
    settings.BENCH_SANDBOX = backend  # a run is made with the sandbox it runs in
    worker = start_worker({**worker_env, "BENCH_SANDBOX": backend}, tmp_path / "worker.log", worker_env["CELERY_QUEUE"])
    try:
        call_command("bench_run", "--agent", "baseline", "--task", "digits", "--wait", "--timeout", "600")
    finally:
        stop_worker(worker)
    said = capsys.readouterr()
    lines = [json.loads(line) for line in said.out.splitlines() if line.startswith("{")]
    # --wait says where the run is as it goes, on stderr, in its page's words: from the queue to the evaluation.
    progress = [
        line for line in said.err.splitlines() if line.startswith(f"run {lines[0]['run']} (baseline on digits): ")
    ]
    assert progress and len(set(progress)) == len(progress), said.err
    assert "Queued, #1 in the queue: waiting for a worker" in progress[0] or "Preparing" in progress[0], progress

    assert lines[0]["status"] == "queued"
    final = lines[-1]
    assert final["status"] == "finished", final
    run = Run.objects.get(pk=final["run"])
    assert run.worker.startswith("test-")  # executed by the worker process, not in here
    assert list(Step.objects.filter(run=run).values_list("action", flat=True)) == [
        "List Files",
        "Execute Script",
        "Final Answer",
    ]
    assert run.final_score == pytest.approx(eval_score_of(run, tmp_path))
    assert final["final_score"] == run.final_score
    assert run.task_version.baseline_score == pytest.approx(run.final_score)
    assert run.sandbox == backend
