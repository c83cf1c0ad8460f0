"""The Celery jobs of the runner: each takes ids, and calls the engine. Queued by name (``jobs.py``)."""

from celery import shared_task
from celery.signals import worker_shutting_down
from django.utils import timezone

from .evaluation import step_score
from .execution import run_execute_next
from .execution.reaper import runs_reap
from .jobs import EXECUTE_RUN, REAP_RUNS, SCORE_STEP
from .models import Run


@shared_task(bind=True, acks_late=True, ignore_result=True, name=EXECUTE_RUN)
def execute_run(self, run_id: int) -> None:
    """Execute the run queued first: usually ``run_id``, which sent the message, unless an earlier run waits
    (runs start in the order they were queued). A message that finds no queued run does nothing."""
    run_execute_next(worker=self.request.hostname or "")


@shared_task(ignore_result=True, name=REAP_RUNS)
def reap_runs() -> dict:
    """Periodic: re-queue runs whose worker died (heartbeat too old), or fail them after too many attempts."""
    return runs_reap()


@shared_task(acks_late=True, ignore_result=True, name=SCORE_STEP)
def score_step(step_id: int) -> None:
    """Evaluate the workspace after one step (intermediate scores for the trace's score-over-steps chart)."""
    step_score(step_id=step_id)


@worker_shutting_down.connect
def hand_back_runs(sender=None, **kwargs) -> None:
    """A worker told to stop (SIGTERM, Ctrl-C) asks its runs to go back to the queue: each notices within a
    second, stops what it runs and is re-queued, to be resumed elsewhere; the worker then exits."""
    Run.objects.filter(worker=str(sender), status__in=Run.ON_WORKER).update(hand_back_requested_at=timezone.now())
