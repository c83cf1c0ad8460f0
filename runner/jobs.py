"""Sending work to the workers. Jobs are named, not imported: code that queues a run needs nothing of the code
that executes it (``tasks.py`` imports the engine; the engine's services only name its jobs).

A run is sent after the transaction that wrote it commits, and ``Run.sent_at`` records that it was. When the
job queue (the broker) cannot be reached, the run stays queued with ``sent_at`` empty, ``QueueUnreachable`` is
raised to whoever committed, and the reaper sends it again later (``runs_resend``); a worker claims a run with a
conditional UPDATE, so a run sent twice is still executed once."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

import kombu.exceptions
from celery import signature
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .models import Run

EXECUTE_RUN = "runner.execute_run"
REAP_RUNS = "runner.reap_runs"
SCORE_STEP = "runner.score_step"


class QueueUnreachable(Exception):
    """The job queue could not be reached. ``unsent`` are the runs that stay queued, to be sent again later."""

    def __init__(self, *, reason: str, sent: list[int], unsent: list[int]) -> None:
        self.reason, self.sent, self.unsent = reason, sent, unsent
        message = f"the job queue is unreachable ({reason})"
        if unsent:
            what = f"runs {', '.join(map(str, unsent))} stay" if len(unsent) > 1 else f"run {unsent[0]} stays"
            message += f"; {what} queued and will be sent when the queue is back"
        super().__init__(message)


def run_enqueue(run: Run) -> None:
    """Send the run to a worker once the transaction that created it commits."""
    runs_enqueue([run])


def runs_enqueue(runs: Iterable[Run]) -> None:
    """Send the runs to workers once the transaction that created them commits (``QueueUnreachable`` from the
    commit if the job queue cannot be reached)."""
    jobs = [(run.pk, run.max_time_s) for run in runs]
    transaction.on_commit(partial(runs_send, jobs))


def runs_send(jobs: list[tuple[int, int]]) -> None:
    """Send ``(run id, max_time_s)`` jobs now and record when; stop at the first failure (the queue is down)."""
    margin = settings.BENCH_PREPARE_TIMEOUT_S + settings.BENCH_EVAL_TIMEOUT_S + 600
    sent: list[int] = []
    try:
        for run_id, max_time_s in jobs:
            signature(EXECUTE_RUN, args=[run_id], time_limit=max_time_s + margin).apply_async()
            sent.append(run_id)
    except kombu.exceptions.OperationalError as exc:
        raise QueueUnreachable(reason=str(exc), sent=sent, unsent=[run_id for run_id, _ in jobs[len(sent) :]]) from exc
    finally:
        Run.objects.filter(pk__in=sent, status=Run.Status.QUEUED).update(sent_at=timezone.now())


def step_score_enqueue(step_id: int) -> None:
    """Score the workspace after one step, once the transaction that asked for it commits (``QueueUnreachable``
    from the commit if the job queue cannot be reached: nothing records the job, it can be asked for again)."""
    transaction.on_commit(partial(step_score_send, step_id))


def step_score_send(step_id: int) -> None:
    try:
        signature(SCORE_STEP, args=[step_id]).apply_async()
    except kombu.exceptions.OperationalError as exc:
        raise QueueUnreachable(reason=str(exc), sent=[], unsent=[]) from exc
