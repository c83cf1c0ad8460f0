"""Validating a task version: the baseline agent's run on it, queued once, whose score becomes the version's
measured baseline. Benchmark runs of a version nobody has validated wait for it (``RunSession``)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from task_bank.models import TaskVersion

from ..actions import EXECUTE_SCRIPT
from ..agents import agents_builtin_ensure
from ..evaluation import EvalResult
from ..models import Run, Step
from ..services import run_create
from ..text import db_text
from .endings import Ending


def task_version_validate_queue(*, version: TaskVersion, enqueue: bool = True) -> Run | None:
    """Queue validation (the baseline agent's run) unless it is already validating or ready."""
    with transaction.atomic():
        claimed = TaskVersion.objects.filter(
            pk=version.pk, status__in=[TaskVersion.Status.PENDING, TaskVersion.Status.FAILED]
        ).update(status=TaskVersion.Status.VALIDATING, validation_log="")
        if not claimed:
            return None
        baseline = next(a for a in agents_builtin_ensure() if a.name == "baseline")
        return run_create(
            task=version.task,
            agent=baseline,
            purpose=Run.Purpose.VALIDATION,
            version=version,
            enqueue=enqueue,
        )


def fail_validation_if_needed(run: Run) -> None:
    """A validation run that ended without a worker finishing it leaves its task version failed, not stuck."""
    if run.purpose == Run.Purpose.VALIDATION:
        with transaction.atomic():
            version = TaskVersion.objects.select_for_update().get(pk=run.task_version_id)
            validation_record(version, Ending(Run.Status.FAILED, error=run.error or "the run failed"), None, 0)


def validation_record(
    version: TaskVersion, ending: Ending, result: EvalResult | None, wall: float, *, run_id: int | None = None
) -> None:
    """The baseline agent's run on a version: its score becomes the version's measured baseline."""
    now = timezone.now()
    if ending.status == Run.Status.CANCELLED:
        version.status = TaskVersion.Status.PENDING
        version.validation_log = "validation was cancelled"
    elif result is not None and result.score is not None:
        version.status = TaskVersion.Status.READY
        version.baseline_score = result.score
        # The baseline's time is the starter script's run, not the task's (cached) preparation.
        scripts = Step.objects.filter(run_id=run_id, action=EXECUTE_SCRIPT).aggregate(total=Sum("duration_s"))
        version.baseline_time_s = scripts["total"] if scripts["total"] is not None else wall
        version.validated_at = now
        version.validation_log = (
            f"baseline {version.metric_name} = {result.score:.6g}; the starter script ran in "
            f"{version.baseline_time_s:.1f} s (the whole validation run took {wall:.1f} s)"
        )
    else:
        version.status = TaskVersion.Status.FAILED
        version.validated_at = now
        reason = (result.error if result else "") or ending.error or "the baseline produced no score"
        failed_script = (
            Step.objects.filter(run_id=run_id, action=EXECUTE_SCRIPT, is_error=True).order_by("-index").first()
            if run_id
            else None
        )
        if failed_script is not None:
            reason += f"\n\nThe starter script failed:\n{failed_script.observation[-4000:]}"
        version.validation_log = db_text(f"the baseline run did not produce a score: {reason}"[-8000:])
    version.save(update_fields=["status", "baseline_score", "baseline_time_s", "validated_at", "validation_log"])
