from celery import shared_task

from .execution import run_execute
from .services import runs_reap


@shared_task(bind=True, acks_late=True, ignore_result=True, name="runner.execute_run")
def execute_run(self, run_id: int) -> None:
    """Execute one run. Idempotent: a run that is not queued any more is left alone."""
    run_execute(run_id, worker=self.request.hostname or "")


@shared_task(ignore_result=True, name="runner.reap_runs")
def reap_runs() -> dict:
    """Periodic: re-queue runs whose worker died (heartbeat too old), or fail them after too many attempts."""
    return runs_reap()


@shared_task(acks_late=True, ignore_result=True, name="runner.score_step")
def score_step(step_id: int) -> None:
    """Evaluate the workspace after one step (intermediate scores for the trace's score-over-steps chart)."""
    from .evaluation import step_score

    step_score(step_id=step_id)
