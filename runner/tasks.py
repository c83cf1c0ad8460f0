"""The Celery jobs of the runner: each takes ids, and calls the engine. Queued by name (``jobs.py``)."""

from celery import shared_task

from .evaluation import step_score
from .execution import run_execute
from .execution.reaper import runs_reap
from .jobs import EXECUTE_RUN, REAP_RUNS, SCORE_STEP


@shared_task(bind=True, acks_late=True, ignore_result=True, name=EXECUTE_RUN)
def execute_run(self, run_id: int) -> None:
    """Execute one run. Idempotent: a run that is not queued any more is left alone."""
    run_execute(run_id, worker=self.request.hostname or "")


@shared_task(ignore_result=True, name=REAP_RUNS)
def reap_runs() -> dict:
    """Periodic: re-queue runs whose worker died (heartbeat too old), or fail them after too many attempts."""
    return runs_reap()


@shared_task(acks_late=True, ignore_result=True, name=SCORE_STEP)
def score_step(step_id: int) -> None:
    """Evaluate the workspace after one step (intermediate scores for the trace's score-over-steps chart)."""
    step_score(step_id=step_id)
