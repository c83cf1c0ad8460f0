"""The reaper: live runs whose worker stopped sending heartbeats are queued again (the new attempt resumes from
the last committed step) or, after too many attempts, failed as infrastructure failures; queued runs whose
message the job queue lost, or that could not be sent (it was unreachable), are sent again, and so are the scoring
jobs of imported runs that still wait for their score and the smoke tests of uploaded agents that still wait for
theirs; workers not heard of for days are forgotten. (Each host's scratch folders that outlived their run's
attempt are removed by ``scratch_sweep``, which a worker on that host runs: ``workers.periodic_passes``.)"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Now
from django.utils import timezone

from ..jobs import (
    JOB_GRACE_S,
    QueueUnreachable,
    import_score_send,
    import_score_time_limit_s,
    messages_waiting,
    run_enqueue,
    runs_send,
    smoke_test_send,
    smoke_test_time_limit_s,
)
from ..models import Agent, Run
from ..workspace.mounts import remove_tree
from .evaluation import STEP_SCORE_SCRATCH
from .validation import fail_validation_if_needed
from .workers import workers_forget
from .workspaces import attempt_scratch_remove

log = logging.getLogger(__name__)


def runs_reap(
    *, stale_after_s: float | None = None, max_attempts: int | None = None, resend_after_s: float | None = None
) -> dict[str, list[int]]:
    """Re-queue or fail the runs on a worker whose heartbeat is older than ``stale_after_s``; send again the
    queued runs not sent for ``resend_after_s``, and the imported runs' lost scoring jobs (``imports_rescore``)."""
    stale_after_s = stale_after_s if stale_after_s is not None else settings.BENCH_HEARTBEAT_STALE_S
    max_attempts = max_attempts if max_attempts is not None else settings.BENCH_RUN_MAX_ATTEMPTS
    cutoff = Now() - timedelta(seconds=stale_after_s)  # heartbeats are in the database's clock
    requeued, failed = [], []
    queue_down = False
    for run in Run.objects.on_worker().filter(heartbeat_at__lt=cutoff).select_related("task_version"):
        same = Run.objects.filter(pk=run.pk, status=run.status, attempt=run.attempt, heartbeat_at__lt=cutoff)
        lost = run.lost_attempts + 1  # this one too
        if lost < max_attempts:
            try:
                with transaction.atomic():
                    back = {"status": Run.Status.QUEUED, "worker": "", "live_action": "", "live_output": ""}
                    if same.update(**back, sent_at=None, lost_attempts=F("lost_attempts") + 1):
                        requeued.append(run.pk)
                        if not queue_down:  # else left unsent: the next pass sends it
                            run_enqueue(run)
            except QueueUnreachable as exc:
                queue_down = True
                log.warning("run %s is queued again but not sent: %s", run.pk, exc)
        elif run_give_up(same, run, lost=lost):
            failed.append(run.pk)
    resent = [] if queue_down else runs_resend(resend_after_s=resend_after_s)
    rescored = [] if queue_down else imports_rescore(resend_after_s=resend_after_s)
    smoke_tests = [] if queue_down else smokes_resend(resend_after_s=resend_after_s)
    forgotten = workers_forget()
    return {
        "requeued": requeued,
        "failed": failed,
        "resent": resent,
        "rescored": rescored,
        "smoke_tests": smoke_tests,
        "forgotten": forgotten,
    }


def run_give_up(same: QuerySet[Run], run: Run, *, lost: int) -> bool:
    """Fail ``run`` (``same``: the row while it is still as read) as an infrastructure failure once ``lost``
    attempts at it were lost, each to a worker that stopped responding or lost the database."""
    if not same.update(
        status=Run.Status.FAILED,
        failure_kind=Run.FailureKind.INFRASTRUCTURE,
        lost_attempts=lost,
        error=f"the worker executing this run stopped responding or lost the database, {lost} times; gave up",
        finished_at=Now(),
    ):
        return False
    fail_validation_if_needed(run)
    return True


def imports_rescore(*, resend_after_s: float | None = None) -> list[int]:
    """Send again the scoring jobs of imported runs that wait for their score: a job never sent (the job queue was
    unreachable) once ``resend_after_s`` has passed, and one sent longer ago than it can last (its worker died or
    the queue lost it). The ids of the runs sent for."""
    resend_after_s = resend_after_s if resend_after_s is not None else settings.BENCH_RESEND_AFTER_S
    now = timezone.now()
    never_sent = Q(sent_at__isnull=True, score_pending_since__lt=now - timedelta(seconds=resend_after_s))
    outlived = Q(sent_at__lt=now - timedelta(seconds=import_score_time_limit_s() + 2 * JOB_GRACE_S))
    waiting = Run.objects.filter(score_pending_since__isnull=False).filter(never_sent | outlived)
    return _jobs_send(waiting.order_by("score_pending_since").values_list("pk", flat=True), import_score_send)


def _jobs_send(ids: Iterable[int], send: Callable[[int], None]) -> list[int]:
    """``send`` the job of each id in turn until the queue cannot be reached; the ids sent for."""
    sent: list[int] = []
    for object_id in ids:
        try:
            send(object_id)
        except QueueUnreachable as exc:
            log.warning("%s", exc)
            break
        sent.append(object_id)
    return sent


def smokes_resend(*, resend_after_s: float | None = None) -> list[int]:
    """Send again the smoke-test jobs of uploaded agents that wait for theirs: a job never sent (the job queue was
    unreachable) once ``resend_after_s`` has passed since the upload, and one sent longer ago than it can last (its
    worker died or the queue lost it). The ids of the agents sent for. (A job that finds its agent tested already
    does nothing; one started ``smoke.SMOKE_MAX_ATTEMPTS`` times fails the test.)"""
    resend_after_s = resend_after_s if resend_after_s is not None else settings.BENCH_RESEND_AFTER_S
    now = timezone.now()
    never_sent = Q(smoke_sent_at__isnull=True, created_at__lt=now - timedelta(seconds=resend_after_s))
    outlived = Q(smoke_sent_at__lt=now - timedelta(seconds=smoke_test_time_limit_s() + 2 * JOB_GRACE_S))
    waiting = Agent.objects.filter(smoke_state=Agent.Smoke.PENDING).filter(never_sent | outlived)
    return _jobs_send(waiting.order_by("pk").values_list("pk", flat=True), smoke_test_send)


def scratch_sweep() -> list[Path]:
    """Remove the scratch folders in this host's runs folder that no live attempt uses: the workspaces and
    evaluation folders of dead attempts (all of them once the run has ended), and step-score folders older than
    any evaluation can last. Agent logs stay."""
    root = Path(settings.BENCH_RUNS_DIR)
    if not root.is_dir():
        return []
    removed: list[Path] = []
    run_dirs = {int(path.name): path for path in root.iterdir() if path.name.isdigit() and path.is_dir()}
    live = Run.objects.live().filter(pk__in=run_dirs).values_list("pk", "status", "attempt")
    # An attempt on a worker keeps its folders; a queued run's next attempt will have a higher number.
    below = {pk: attempt + (status == Run.Status.QUEUED) for pk, status, attempt in live}
    for run_id, path in run_dirs.items():
        removed += attempt_scratch_remove(path, below=below.get(run_id))
    too_old = time.time() - (settings.BENCH_EVAL_TIMEOUT_S + settings.BENCH_ACTION_TIMEOUT_S + 600)
    for path in root.glob(f"{STEP_SCORE_SCRATCH}*"):
        if path.is_dir() and path.lstat().st_mtime < too_old:
            remove_tree(path)
            removed.append(path)
    return removed


def runs_resend(*, resend_after_s: float | None = None) -> list[int]:
    """Send the messages the queued runs are missing; the ids of the runs sent for.

    Each queued run should have a message waiting in its kind's queue (a worker that takes one starts the run of
    that kind queued first). Once some run has waited ``resend_after_s`` (``BENCH_RESEND_AFTER_S``) since it was
    last sent, the runs queued are compared with the messages waiting, queue by queue, and the difference is sent
    for the runs that waited longest: messages lost by the broker (a restart) or never sent (it was unreachable).
    A message too many does nothing. A broker that cannot count its messages gets only the runs that were never
    sent."""
    resend_after_s = resend_after_s if resend_after_s is not None else settings.BENCH_RESEND_AFTER_S
    cutoff = timezone.now() - timedelta(seconds=resend_after_s)
    resent: list[int] = []
    for kind in Run.Queue.values:
        queued = Run.objects.filter(status=Run.Status.QUEUED, queue=kind)
        waited = queued.filter(Q(sent_at__lt=cutoff) | Q(sent_at__isnull=True, created_at__lt=cutoff))
        stale = list(waited.order_by(*Run.QUEUE_ORDER).values_list("pk", flat=True))
        if not stale:
            continue
        waiting = messages_waiting(kind)
        if waiting is None:
            never_sent = waited.filter(sent_at__isnull=True).order_by(*Run.QUEUE_ORDER)
            missing = list(never_sent.values_list("pk", flat=True))
        else:
            missing = stale[: max(queued.count() - waiting, 0)]
        if not missing:
            continue
        try:
            runs_send(missing)
        except QueueUnreachable as exc:
            log.warning("%s", exc)
            return resent + exc.sent
        log.info("sent %s missing messages for queued %s %s", len(missing), Run.Queue(kind).label, missing)
        resent += missing
    return resent
