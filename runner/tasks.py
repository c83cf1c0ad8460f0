"""The Celery jobs of the runner: each takes ids, and calls the engine. Queued by name (``jobs.py``).

A worker told to stop (SIGTERM, or Ctrl-C under ``make run``) hands its runs back: each notices within a second,
stops what it runs and goes back to the queue, first in line, to be resumed from its last recorded step by the
next worker; the worker then exits. It starts nothing new meanwhile: a message it still takes is sent again."""

import logging
import os
from pathlib import Path

from celery import shared_task
from celery.signals import worker_init, worker_ready, worker_shutdown, worker_shutting_down
from django.conf import settings
from django.utils import timezone

from .evaluation import step_score
from .execution import run_execute_next, stopping
from .execution.reaper import runs_reap
from .imports import import_score
from .jobs import (
    EXECUTE_RUN,
    JOB_GRACE_S,
    REAP_RUNS,
    SCORE_IMPORT,
    SCORE_STEP,
    QueueUnreachable,
    import_score_time_limit_s,
    runs_send,
)
from .models import Run
from .sandboxes import docker_containers_sweep
from .workers import HeartbeatThread, worker_stopped

log = logging.getLogger(__name__)


# Every job has a time limit (enforced by the prefork pool, Celery's default): at the soft limit the job is told
# (SoftTimeLimitExceeded), JOB_GRACE_S later its process is killed. A run job's message carries its limits
# (jobs.run_job_time_limits); these are the defaults of a message without them.


@shared_task(
    bind=True,
    acks_late=True,
    ignore_result=True,
    name=EXECUTE_RUN,
    soft_time_limit=settings.BENCH_RUN_JOB_TIME_LIMIT_S,
    time_limit=settings.BENCH_RUN_JOB_TIME_LIMIT_S + JOB_GRACE_S,
)
def execute_run(self, run_id: int, queue: str | None = None) -> None:
    """Execute the run of kind ``queue`` queued first: usually ``run_id``, which sent the message, unless an
    earlier run of its kind waits (runs start in the order they were queued). A message that finds no queued run
    does nothing. (A message without ``queue``, sent before runs had kinds, claims a run of any kind.)

    The job's time limit is not the run's (a message does not know which run it will start): a run still going at
    ``BENCH_RUN_JOB_TIME_LIMIT_S`` goes back to the queue and is resumed by another job (``RunSession``)."""
    if worker_stopping():
        try:
            runs_send([run_id])  # for the next worker
        except QueueUnreachable as exc:
            log.warning("%s", exc)
        return
    with stopping.busy():
        run_execute_next(worker=self.request.hostname or "", queue=queue)


@shared_task(
    ignore_result=True,
    name=REAP_RUNS,
    soft_time_limit=settings.BENCH_REAPER_TIME_LIMIT_S,
    time_limit=settings.BENCH_REAPER_TIME_LIMIT_S + JOB_GRACE_S,
)
def reap_runs() -> dict:
    """Periodic: re-queue runs whose worker died (heartbeat too old), or fail them after too many attempts."""
    return runs_reap()


@shared_task(
    acks_late=True,
    ignore_result=True,
    name=SCORE_STEP,
    soft_time_limit=settings.BENCH_PREPARE_TIMEOUT_S + settings.BENCH_EVAL_TIMEOUT_S + JOB_GRACE_S,
    time_limit=settings.BENCH_PREPARE_TIMEOUT_S + settings.BENCH_EVAL_TIMEOUT_S + 2 * JOB_GRACE_S,
)
def score_step(step_id: int) -> None:
    """Evaluate the workspace after one step (intermediate scores for the trace's score-over-steps chart): the
    task's preparation (cached, usually done) and one evaluation at most."""
    step_score(step_id=step_id)


@shared_task(
    acks_late=True,
    ignore_result=True,
    name=SCORE_IMPORT,
    soft_time_limit=import_score_time_limit_s(),
    time_limit=import_score_time_limit_s() + JOB_GRACE_S,
)
def score_import(run_id: int) -> None:
    """Score an imported run's final workspace (an upload's run waits for it)."""
    import_score(run_id)


def _stopping_marker(pid: int) -> Path:
    """Present while the worker whose main process is ``pid`` is stopping (its pool processes look for it)."""
    return Path(settings.BENCH_RUNS_DIR) / f".worker-stopping-{pid}"


def worker_stopping() -> bool:
    """Is the worker this job runs in stopping? (The job runs in the main process or in one of its children.)"""
    return stopping.requested.is_set() or any(_stopping_marker(pid).exists() for pid in {os.getpid(), os.getppid()})


@worker_init.connect
@worker_shutdown.connect
def forget_stopping(**kwargs) -> None:
    _stopping_marker(os.getpid()).unlink(missing_ok=True)


@worker_init.connect
def sweep_sandbox_containers(**kwargs) -> None:
    """Containers of the docker sandbox whose worker process died (their removal cut short, or the whole worker
    killed) are removed when a worker starts; those of live workers stay."""
    if settings.BENCH_SANDBOX == "docker":
        removed = docker_containers_sweep()
        if removed:
            log.info("removed %d sandbox containers left by dead workers", removed)


@worker_shutting_down.connect
def hand_back_runs(sender=None, **kwargs) -> None:
    marker = _stopping_marker(os.getpid())
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    Run.objects.filter(worker=str(sender), status__in=Run.ON_WORKER).update(hand_back_requested_at=timezone.now())


_heartbeat: HeartbeatThread | None = None


@worker_ready.connect
def heartbeat_start(sender=None, **kwargs) -> None:
    """The worker records a heartbeat (runner.workers) from its main process while it lives."""
    global _heartbeat
    queues = sorted(sender.app.amqp.queues.consume_from)
    concurrency = getattr(getattr(sender, "controller", None), "concurrency", None) or 1
    _heartbeat = HeartbeatThread(name=sender.hostname, queues=queues, concurrency=concurrency, pid=os.getpid())
    _heartbeat.start()


@worker_shutdown.connect
def heartbeat_stop(sender=None, **kwargs) -> None:
    global _heartbeat
    if _heartbeat is None:
        return
    _heartbeat.stop()
    try:
        worker_stopped(name=_heartbeat.worker["name"])
    except Exception:  # the database is gone: the page will call the worker lost instead of stopped
        log.exception("worker %s: its stop could not be recorded", _heartbeat.worker["name"])
    _heartbeat = None
