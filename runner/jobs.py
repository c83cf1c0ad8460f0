"""Sending work to the workers. Jobs are named, not imported: code that queues a run needs nothing of the code
that executes it (``tasks.py`` imports the engine; the engine's services only name its jobs)."""

from __future__ import annotations

from celery import signature
from django.conf import settings
from django.db import transaction

from .models import Run

EXECUTE_RUN = "runner.execute_run"
REAP_RUNS = "runner.reap_runs"
SCORE_STEP = "runner.score_step"


def run_enqueue(run: Run) -> None:
    """Send the run to a worker once the transaction that created it commits."""
    margin = settings.BENCH_PREPARE_TIMEOUT_S + settings.BENCH_EVAL_TIMEOUT_S + 600
    job = signature(EXECUTE_RUN, args=[run.pk], time_limit=run.max_time_s + margin)
    transaction.on_commit(job.apply_async)


def step_score_enqueue(step_id: int) -> None:
    """Score the workspace after one step, once the transaction that asked for it commits."""
    transaction.on_commit(signature(SCORE_STEP, args=[step_id]).apply_async)
