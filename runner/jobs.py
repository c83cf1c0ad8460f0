"""Sending work to the workers. Jobs are named, not imported: code that queues a run needs nothing of the code
that executes it (``tasks.py`` imports the engine; the engine's services only name its jobs).

The database is the queue; the job queue (the broker) only wakes workers. Each queued run sends one
``execute_run`` message, and a worker that receives one starts the queued run that was queued first (not
necessarily the one the message names), so runs start in the order they were queued whatever order the broker
delivers in, and a lost message delays the queue instead of stranding a run: the reaper compares the runs
waiting with the messages waiting and sends what is missing (``runs_resend``). A message that finds no queued
run does nothing.

A run is sent after the transaction that wrote it commits, and ``Run.sent_at`` records when. When the job queue
cannot be reached, the run stays queued with ``sent_at`` empty and ``QueueUnreachable`` is raised to whoever
committed."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

import kombu.exceptions
from celery import current_app, signature
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
    transaction.on_commit(partial(runs_send, [run.pk for run in runs]))


def runs_send(run_ids: list[int]) -> None:
    """Send one message per run now and record when; stop at the first failure (the queue is down)."""
    sent: list[int] = []
    try:
        for run_id in run_ids:
            signature(EXECUTE_RUN, args=[run_id]).apply_async()
            sent.append(run_id)
    except kombu.exceptions.OperationalError as exc:
        raise QueueUnreachable(reason=str(exc), sent=sent, unsent=run_ids[len(sent) :]) from exc
    finally:
        Run.objects.filter(pk__in=sent, status=Run.Status.QUEUED).update(sent_at=timezone.now())


def messages_waiting() -> int | None:
    """How many messages wait in the runs' job queue (None when the queue cannot tell or cannot be reached).
    Messages a worker has taken are not counted: a worker takes one when it can start a run."""
    queue = current_app.conf.task_default_queue
    try:
        with current_app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1)
            channel = connection.default_channel
            try:
                return channel.queue_declare(queue=queue, passive=True).message_count
            except kombu.exceptions.ChannelError:  # no such queue (Redis drops an empty one): nothing waits
                return 0
    except Exception:  # a broker that cannot count, or none at all: the caller falls back
        return None


def step_score_enqueue(step_id: int) -> None:
    """Score the workspace after one step, once the transaction that asked for it commits (``QueueUnreachable``
    from the commit if the job queue cannot be reached: nothing records the job, it can be asked for again)."""
    transaction.on_commit(partial(step_score_send, step_id))


def step_score_send(step_id: int) -> None:
    try:
        signature(SCORE_STEP, args=[step_id]).apply_async()
    except kombu.exceptions.OperationalError as exc:
        raise QueueUnreachable(reason=str(exc), sent=[], unsent=[]) from exc
