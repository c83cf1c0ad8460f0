"""The Celery jobs of the runner: each takes ids, and calls the engine. Queued by name (``jobs.py``). The worker's
own life (heartbeats, handing runs back when it stops) is ``execution/workers.py``."""

import logging

from celery import shared_task
from django.conf import settings

from .agents.smoke import agent_smoke_run
from .execution import run_execute_next, stopping
from .execution.collector import blobs_collect
from .execution.evaluation import step_score
from .execution.workers import worker_stopping
from .jobs import (
    COLLECT_BLOBS,
    JOB_GRACE_S,
    SCORE_IMPORT,
    SCORE_STEP,
    SMOKE_TEST,
    START_NEXT_RUN,
    QueueUnreachable,
    import_score_time_limit_s,
    runs_send,
    smoke_test_time_limit_s,
)
from .logs.imports import import_score

log = logging.getLogger(__name__)


# Every job has a time limit (enforced by the prefork pool, Celery's default): at the soft limit the job is told
# (SoftTimeLimitExceeded), JOB_GRACE_S later its process is killed. A run job's message carries its limits
# (jobs.run_job_time_limits); these are the defaults of a message without them.


@shared_task(
    bind=True,
    acks_late=True,
    ignore_result=True,
    name=START_NEXT_RUN,
    soft_time_limit=settings.BENCH_RUN_JOB_TIME_LIMIT_S,
    time_limit=settings.BENCH_RUN_JOB_TIME_LIMIT_S + JOB_GRACE_S,
)
def start_next_run(self, run_id: int, queue: str | None = None) -> None:
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


@shared_task(
    acks_late=True,
    ignore_result=True,
    name=SMOKE_TEST,
    soft_time_limit=smoke_test_time_limit_s(),
    time_limit=smoke_test_time_limit_s() + JOB_GRACE_S,
)
def smoke_test(agent_id: int) -> None:
    """Smoke-test an uploaded agent (``runner.agents.smoke``): its upload's page and the API wait for it."""
    agent_smoke_run(agent_id)


@shared_task(
    ignore_result=True,
    name=COLLECT_BLOBS,
    soft_time_limit=settings.BENCH_BLOB_COLLECT_TIME_LIMIT_S,
    time_limit=settings.BENCH_BLOB_COLLECT_TIME_LIMIT_S + JOB_GRACE_S,
)
def collect_blobs() -> dict:
    """Periodic: remove the blobs nothing names any more, past their grace period (``execution/collector.py``)."""
    return blobs_collect().as_json()
