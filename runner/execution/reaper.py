"""The reaper: live runs whose worker stopped sending heartbeats are queued again (the new attempt resumes from
the last committed step) or, after too many attempts, failed as infrastructure failures."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ..jobs import run_enqueue
from ..models import Run
from .validation import fail_validation_if_needed


def runs_reap(*, stale_after_s: float | None = None, max_attempts: int | None = None) -> dict[str, list[int]]:
    """Re-queue or fail the runs on a worker whose heartbeat is older than ``stale_after_s``."""
    stale_after_s = stale_after_s if stale_after_s is not None else settings.BENCH_HEARTBEAT_STALE_S
    max_attempts = max_attempts if max_attempts is not None else settings.BENCH_RUN_MAX_ATTEMPTS
    cutoff = timezone.now() - timedelta(seconds=stale_after_s)
    requeued, failed = [], []
    for run in Run.objects.filter(status__in=Run.ON_WORKER, heartbeat_at__lt=cutoff).select_related("task_version"):
        same = Run.objects.filter(pk=run.pk, status=run.status, attempt=run.attempt, heartbeat_at__lt=cutoff)
        with transaction.atomic():
            if run.attempt < max_attempts:
                if same.update(status=Run.Status.QUEUED, worker="", live_action="", live_output=""):
                    run_enqueue(run)
                    requeued.append(run.pk)
            elif same.update(
                status=Run.Status.FAILED,
                failure_kind=Run.FailureKind.INFRASTRUCTURE,
                error=f"the worker executing this run stopped responding, {run.attempt} times; gave up",
                finished_at=timezone.now(),
            ):
                fail_validation_if_needed(run)
                failed.append(run.pk)
    return {"requeued": requeued, "failed": failed}
