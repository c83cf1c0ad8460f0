"""The reaper: live runs whose worker stopped sending heartbeats are queued again (the new attempt resumes from
the last committed step) or, after too many attempts, failed as infrastructure failures; queued runs that could
not be sent to the job queue (it was unreachable) are sent again."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ..jobs import QueueUnreachable, run_enqueue, runs_send
from ..models import Run
from .validation import fail_validation_if_needed

log = logging.getLogger(__name__)


def runs_reap(
    *, stale_after_s: float | None = None, max_attempts: int | None = None, resend_after_s: float | None = None
) -> dict[str, list[int]]:
    """Re-queue or fail the runs on a worker whose heartbeat is older than ``stale_after_s``; send again the
    queued runs not sent for ``resend_after_s``."""
    stale_after_s = stale_after_s if stale_after_s is not None else settings.BENCH_HEARTBEAT_STALE_S
    max_attempts = max_attempts if max_attempts is not None else settings.BENCH_RUN_MAX_ATTEMPTS
    cutoff = timezone.now() - timedelta(seconds=stale_after_s)
    requeued, failed = [], []
    queue_down = False
    for run in Run.objects.filter(status__in=Run.ON_WORKER, heartbeat_at__lt=cutoff).select_related("task_version"):
        same = Run.objects.filter(pk=run.pk, status=run.status, attempt=run.attempt, heartbeat_at__lt=cutoff)
        if run.attempt < max_attempts:
            try:
                with transaction.atomic():
                    if same.update(status=Run.Status.QUEUED, worker="", live_action="", live_output="", sent_at=None):
                        requeued.append(run.pk)
                        if not queue_down:  # else left unsent: the next pass sends it
                            run_enqueue(run)
            except QueueUnreachable as exc:
                queue_down = True
                log.warning("run %s is queued again but not sent: %s", run.pk, exc)
        elif same.update(
            status=Run.Status.FAILED,
            failure_kind=Run.FailureKind.INFRASTRUCTURE,
            error=f"the worker executing this run stopped responding, {run.attempt} times; gave up",
            finished_at=timezone.now(),
        ):
            fail_validation_if_needed(run)
            failed.append(run.pk)
    resent = [] if queue_down else runs_resend(resend_after_s=resend_after_s)
    return {"requeued": requeued, "failed": failed, "resent": resent}


def runs_resend(*, resend_after_s: float | None = None) -> list[int]:
    """Send again the queued runs that have waited ``resend_after_s`` (``BENCH_RESEND_AFTER_S``) without being
    sent (the job queue was unreachable when they were queued); the ids of those sent."""
    resend_after_s = resend_after_s if resend_after_s is not None else settings.BENCH_RESEND_AFTER_S
    cutoff = timezone.now() - timedelta(seconds=resend_after_s)
    unsent = Run.objects.filter(status=Run.Status.QUEUED, sent_at__isnull=True, created_at__lt=cutoff)
    jobs = list(unsent.order_by("pk").values_list("pk", "max_time_s"))
    try:
        runs_send(jobs)
    except QueueUnreachable as exc:
        log.warning("%s", exc)
        return exc.sent
    return [run_id for run_id, _ in jobs]
