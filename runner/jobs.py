"""Sending work to the workers. Jobs are named, not imported: code that queues a run needs nothing of the code
that executes it (``tasks.py`` imports the engine; the engine's services only name its jobs).

The database is the queue; the job queue (the broker) only wakes workers. Each queued run sends one
``START_NEXT_RUN`` message, and a worker that receives one starts the queued run that was queued first (not
necessarily the one the message names), so runs start in the order they were queued whatever order the broker
delivers in, and a lost message delays the queue instead of stranding a run: the reaper compares the runs
waiting with the messages waiting and sends what is missing (``runs_resend``). A message that finds no queued
run does nothing.

Queues by kind of work: agent runs, GPU runs and demo runs (``Run.Queue``), and short jobs (step scoring, an
uploaded agent's smoke test, the reaper) each have a job queue (``queue_name``). A run's message goes to its kind's
queue and names the kind, and the worker that takes it claims the first queued run of that kind: a GPU worker (one
serving only the GPU queue) never starts a CPU run, nor a CPU worker a GPU run. The demo has a queue of its
own that only a worker named to it serves (it is not among the queues a worker started without ``--queues``
serves; the Procfile's ``demo`` process), so the first start's demo never holds the worker a person's run waits
for. An imported run's scoring job goes to its kind's queue too (it
can re-run the uploaded script: run-sized work); the reaper's count of a queue's messages then includes it, which
at most delays a resend by one pass.

A run is sent after the transaction that wrote it commits, and ``Run.sent_at`` records when. When the job queue
cannot be reached, the run stays queued with ``sent_at`` empty and ``QueueUnreachable`` is raised to whoever
committed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import partial

import kombu.exceptions
from celery import current_app, signature
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .models import Agent, Run

log = logging.getLogger(__name__)

#: The job that starts the next queued run of a kind (``tasks.start_next_run``). Its wire name is older than what
#: it does and is kept, so messages waiting in a broker across an upgrade still find their job.
START_NEXT_RUN = "runner.execute_run"
SCORE_STEP = "runner.score_step"
SCORE_IMPORT = "runner.score_import"
SMOKE_TEST = "runner.smoke_test"
COLLECT_BLOBS = "runner.collect_blobs"


class QueueUnreachable(Exception):
    """The job queue could not be reached. ``unsent`` are the runs that stay queued, to be sent again later."""

    def __init__(self, *, reason: str, sent: list[int], unsent: list[int]) -> None:
        self.reason, self.sent, self.unsent = reason, sent, unsent
        message = f"the job queue is unreachable ({reason})"
        if unsent:
            what = f"runs {', '.join(map(str, unsent))} stay" if len(unsent) > 1 else f"run {unsent[0]} stays"
            message += f"; {what} queued and will be sent when the queue is back"
        super().__init__(message)


#: The kind of work of the short jobs (step scoring, smoke tests, the reaper, the collector): no run is of it. (An
#: imported run's scoring goes to the queue of its kind of run: ``import_score_send``.)
SHORT_JOBS = "short"


def queue_name(kind: str) -> str:
    """The job queue of a kind of work: agent runs on the default queue (``CELERY_QUEUE``); short jobs and GPU runs
    on ``BENCH_SHORT_QUEUE`` and ``BENCH_GPU_QUEUE``, by default the default queue's name with -short or -gpu; demo
    runs on the default queue's name with -demo."""
    runs = current_app.conf.task_default_queue
    if kind == SHORT_JOBS:
        return settings.BENCH_SHORT_QUEUE or f"{runs}-short"
    if kind == Run.Queue.GPU:
        return settings.BENCH_GPU_QUEUE or f"{runs}-gpu"
    if kind == Run.Queue.DEMO:
        return f"{runs}-demo"
    return runs


def queue_names() -> list[str]:
    """Every job queue (agent runs, short jobs, GPU runs, demo runs)."""
    return [queue_name(kind) for kind in (Run.Queue.RUNS, SHORT_JOBS, Run.Queue.GPU, Run.Queue.DEMO)]


def job_route(name: str, args, kwargs, options, task=None, **kw) -> dict | None:
    """Celery's router (``CELERY_TASK_ROUTES``): the short jobs go to the short queue; a run's message names its
    queue when it is sent."""
    if name in (SCORE_STEP, SMOKE_TEST, COLLECT_BLOBS):
        return {"queue": queue_name(SHORT_JOBS)}
    return None


def run_enqueue(run: Run) -> None:
    """Send the run to a worker once the transaction that created it commits."""
    runs_enqueue([run])


def runs_enqueue(runs: Iterable[Run]) -> None:
    """Send the runs to workers once the transaction that created them commits (``QueueUnreachable`` from the
    commit if the job queue cannot be reached)."""
    transaction.on_commit(partial(runs_send, [run.pk for run in runs]))


#: Seconds between a job's soft time limit (the job is told: SoftTimeLimitExceeded) and its hard one (its process is
#: killed).
JOB_GRACE_S = 60


def run_job_time_limits() -> dict:
    """A run job's time limits, as its message carries them: this process's ``BENCH_RUN_JOB_TIME_LIMIT_S`` at the
    time of sending (named here, not read off the task object, whose options Celery caches)."""
    soft = settings.BENCH_RUN_JOB_TIME_LIMIT_S
    return {"soft_time_limit": soft, "time_limit": soft + JOB_GRACE_S}


def runs_send(run_ids: list[int]) -> None:
    """Send one message per run, to its kind's queue, now and record when; stop at the first failure (the queue is
    down)."""
    sent: list[int] = []
    kinds = dict(Run.objects.filter(pk__in=run_ids).values_list("pk", "queue"))
    try:
        for run_id in run_ids:
            kind = kinds.get(run_id, Run.Queue.RUNS)
            signature(START_NEXT_RUN, args=[run_id], kwargs={"queue": kind}).apply_async(
                queue=queue_name(kind), **run_job_time_limits()
            )
            sent.append(run_id)
    except kombu.exceptions.OperationalError as exc:
        raise QueueUnreachable(reason=str(exc), sent=sent, unsent=run_ids[len(sent) :]) from exc
    finally:
        Run.objects.filter(pk__in=sent, status=Run.Status.QUEUED).update(sent_at=timezone.now())


def messages_waiting(kind: str = Run.Queue.RUNS) -> int | None:
    """How many messages wait in the job queue of a kind of work (None when the queue cannot tell or cannot be
    reached). Messages a worker has taken are not counted: a worker takes one when it can start a run."""
    queue = queue_name(kind)
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
    transaction.on_commit(partial(job_send, SCORE_STEP, step_id))


def import_score_enqueue(run_id: int) -> None:
    """Score an imported run's final workspace once the transaction that recorded the run commits. A queue that
    cannot be reached is only logged: the run stays waiting (``Run.score_pending_since``) with its job unsent, and
    the reaper sends it (``imports_rescore``)."""
    _send_on_commit(import_score_send, run_id, "imported run %s waits for its score: %s")


def _send_on_commit(send: Callable[[int], None], object_id: int, waits: str) -> None:
    """``send(object_id)`` once the transaction commits; a queue that cannot be reached is logged (``waits``, with
    the id and the reason): what waits for the job is in the database, and the reaper sends it later."""

    def later() -> None:
        try:
            send(object_id)
        except QueueUnreachable as exc:
            log.warning(waits, object_id, exc)

    transaction.on_commit(later)


def import_score_send(run_id: int) -> None:
    """Send an imported run's scoring job now, to the queue of its kind of run (``Run.queue``), and record when
    (``Run.sent_at``: an imported run is never queued). Not a short job: an evaluation may take as long as a run's,
    which must not hold up the reaper on the short queue."""
    kind = Run.objects.filter(pk=run_id).values_list("queue", flat=True).first() or Run.Queue.RUNS
    job_send(SCORE_IMPORT, run_id, queue=queue_name(kind))
    Run.objects.filter(pk=run_id).update(sent_at=timezone.now())


def smoke_test_enqueue(agent_id: int) -> None:
    """Smoke-test an uploaded agent on a worker once the transaction that stored it commits. A queue that cannot be
    reached is only logged: the agent waits (``Agent.Smoke.PENDING``) with its job unsent, and the reaper sends it
    (``reaper.smokes_resend``)."""
    _send_on_commit(smoke_test_send, agent_id, "agent %s waits for its smoke test: %s")


def smoke_test_send(agent_id: int) -> None:
    """Send an agent's smoke-test job now (a short job) and record when (``Agent.smoke_sent_at``)."""
    job_send(SMOKE_TEST, agent_id)
    Agent.objects.filter(pk=agent_id).update(smoke_sent_at=timezone.now())


def smoke_test_time_limit_s() -> int:
    """How long a smoke-test job may take (its soft time limit): starting the agent and its first answer."""
    return int(settings.BENCH_AGENT_SMOKE_TIMEOUT_S) + JOB_GRACE_S


def job_send(name: str, object_id: int, *, queue: str | None = None) -> None:
    """Send the job ``name`` about one object now, to ``queue`` (else where ``job_route`` sends it);
    ``QueueUnreachable`` if the job queue cannot be reached."""
    try:
        signature(name, args=[object_id]).apply_async(**({"queue": queue} if queue else {}))
    except kombu.exceptions.OperationalError as exc:
        raise QueueUnreachable(reason=str(exc), sent=[], unsent=[]) from exc


def import_score_time_limit_s() -> int:
    """How long scoring an imported run may take (its job's soft time limit): the task's preparation (cached, usually
    done), then one evaluation of its files (an uploaded log's code is never run)."""
    return settings.BENCH_PREPARE_TIMEOUT_S + settings.BENCH_EVAL_TIMEOUT_S
