"""Writes for runs: create, enqueue, cancel, and queue task validation."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from task_bank.models import Task, TaskVersion

from .agents import agents_builtin_ensure
from .models import Agent, Batch, Run


class RunRequestError(Exception):
    """A run cannot be created as asked; the message says why and what would work."""


def run_enqueue(run: Run) -> None:
    """Send the run to a worker once the transaction that created it commits."""
    from .tasks import execute_run

    margin = settings.BENCH_PREPARE_TIMEOUT_S + settings.BENCH_EVAL_TIMEOUT_S + 600
    transaction.on_commit(lambda: execute_run.apply_async(args=[run.pk], time_limit=run.max_time_s + margin))


def run_create(
    *,
    task: Task,
    agent: Agent,
    model: str = "",
    batch: Batch | None = None,
    purpose: str = Run.Purpose.BENCHMARK,
    version: TaskVersion | None = None,
    max_steps: int | None = None,
    max_time_s: int | None = None,
    enqueue: bool = True,
) -> Run:
    version = version or task.current_version
    if version is None:
        raise RunRequestError(f"task {task.slug} has no files yet; import a task package first")
    if not task.is_enabled and purpose == Run.Purpose.BENCHMARK:
        raise RunRequestError(f"task {task.slug} is retired and takes no new runs")
    if version.status == TaskVersion.Status.FAILED and purpose == Run.Purpose.BENCHMARK:
        raise RunRequestError(
            f"task {task.slug} v{version.number} failed validation and cannot run:\n{version.validation_log}"
        )
    run = Run.objects.create(
        task=task,
        task_version=version,
        agent=agent,
        batch=batch,
        model=model or agent.default_model,
        purpose=purpose,
        sandbox=settings.BENCH_SANDBOX,
        max_steps=max_steps or version.max_steps,
        max_time_s=max_time_s or version.max_time_s,
    )
    if enqueue:
        run_enqueue(run)
    return run


@transaction.atomic
def batch_create(
    *,
    agent: Agent,
    tasks: list[Task],
    repeats: int = 1,
    model: str = "",
    max_steps: int | None = None,
    max_time_s: int | None = None,
    enqueue: bool = True,
    note: str = "",
) -> tuple[Batch, list[Run]]:
    if repeats < 1:
        raise RunRequestError("repeats must be at least 1")
    batch = Batch.objects.create(agent=agent, model=model, repeats=repeats, note=note)
    runs = [
        run_create(
            task=task,
            agent=agent,
            model=model,
            batch=batch,
            max_steps=max_steps,
            max_time_s=max_time_s,
            enqueue=enqueue,
        )
        for task in tasks
        for _ in range(repeats)
    ]
    return batch, runs


def run_cancel(*, run: Run) -> bool:
    """Ask for a run to stop. A queued run is cancelled at once; a live one stops within seconds."""
    now = timezone.now()
    if Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED).update(
        status=Run.Status.CANCELLED,
        cancel_requested_at=now,
        finished_at=now,
        error="cancelled before it started",
    ):
        return True
    return bool(
        Run.objects.filter(pk=run.pk, status__in=Run.LIVE, cancel_requested_at__isnull=True).update(
            cancel_requested_at=now
        )
    )


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
