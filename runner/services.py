"""Writes for runs: create, enqueue, cancel, and queue task validation."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from task_bank.models import Task, TaskVersion

from .agents import agents_builtin_ensure
from .models import Agent, Batch, ModelEndpoint, Run, Step


class RunRequestError(Exception):
    """A run cannot be created as asked; the message says why and what would work."""


def run_enqueue(run: Run) -> None:
    """Send the run to a worker once the transaction that created it commits."""
    from .tasks import execute_run

    margin = settings.BENCH_PREPARE_TIMEOUT_S + settings.BENCH_EVAL_TIMEOUT_S + 600
    transaction.on_commit(lambda: execute_run.apply_async(args=[run.pk], time_limit=run.max_time_s + margin))


def agent_resolve(spec: str) -> Agent:
    """An agent by "name" (its newest version) or "name@version"; the error lists the valid ones."""
    name, _, version = spec.partition("@")
    agents = Agent.objects.filter(name=name, **({"version": version} if version else {}))
    agent = agents.order_by("-created_at").first()
    if agent is None:
        valid = sorted({f"{a.name}@{a.version}" for a in Agent.objects.all()})
        raise RunRequestError(f"unknown agent {spec!r}; valid agents: {', '.join(valid)}")
    return agent


def limits_check(
    *, max_steps: int | None, max_time_s: int | None, max_tokens: int | None, max_cost: Decimal | None
) -> None:
    """Run limits as asked for: None means the task's own (steps, time) or no budget (tokens, cost)."""
    for name, value, least in (
        ("max_steps", max_steps, 1),
        ("max_time_s", max_time_s, 1),
        ("max_tokens", max_tokens, 1),
        ("max_cost", max_cost, 0),
    ):
        if value is not None and value < least:
            raise RunRequestError(f"{name} must be at least {least} (or left out), got {value}")


def model_check(*, agent: Agent, model: str) -> None:
    """An agent that uses an LLM needs a configured, enabled model endpoint; the others need none."""
    configured = sorted(ModelEndpoint.objects.filter(is_enabled=True).values_list("name", flat=True))
    names = ", ".join(configured) or "none yet (add one in the admin or BENCH_MODEL_ENDPOINTS)"
    if model and model not in configured:
        raise RunRequestError(f"no enabled model endpoint named {model!r}; configured: {names}")
    if agent.uses_llm and not model:
        raise RunRequestError(f"agent {agent.name} uses an LLM: give it a model (--model NAME); configured: {names}")


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
    max_tokens: int | None = None,
    max_cost: Decimal | None = None,
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
    limits_check(max_steps=max_steps, max_time_s=max_time_s, max_tokens=max_tokens, max_cost=max_cost)
    model = model or agent.default_model
    model_check(agent=agent, model=model)
    run = Run.objects.create(
        task=task,
        task_version=version,
        agent=agent,
        batch=batch,
        model=model,
        purpose=purpose,
        sandbox=settings.BENCH_SANDBOX,
        max_steps=max_steps or version.max_steps,
        max_time_s=max_time_s or version.max_time_s,
        max_tokens=max_tokens,
        max_cost=max_cost,
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
    max_tokens: int | None = None,
    max_cost: Decimal | None = None,
    enqueue: bool = True,
    note: str = "",
    created_by: AbstractBaseUser | None = None,
) -> tuple[Batch, list[Run]]:
    if repeats < 1:
        raise RunRequestError("repeats must be at least 1")
    batch = Batch.objects.create(agent=agent, model=model, repeats=repeats, note=note, created_by=created_by)
    runs = [
        run_create(
            task=task,
            agent=agent,
            model=model,
            batch=batch,
            max_steps=max_steps,
            max_time_s=max_time_s,
            max_tokens=max_tokens,
            max_cost=max_cost,
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
        if run.purpose == Run.Purpose.VALIDATION:  # the version can be validated again later
            TaskVersion.objects.filter(pk=run.task_version_id, status=TaskVersion.Status.VALIDATING).update(
                status=TaskVersion.Status.PENDING, validation_log="validation was cancelled before it started"
            )
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


def runs_reap(*, stale_after_s: float | None = None, max_attempts: int | None = None) -> dict[str, list[int]]:
    """Find live runs whose worker stopped sending heartbeats: queue them again (the new attempt resumes from
    the last committed step) or, after max_attempts, fail them as infrastructure failures."""
    from .execution import fail_validation_if_needed

    stale_after_s = stale_after_s if stale_after_s is not None else settings.BENCH_HEARTBEAT_STALE_S
    max_attempts = max_attempts if max_attempts is not None else settings.BENCH_RUN_MAX_ATTEMPTS
    cutoff = timezone.now() - timedelta(seconds=stale_after_s)
    live = [Run.Status.PREPARING, Run.Status.RUNNING, Run.Status.EVALUATING]
    requeued, failed = [], []
    for run in Run.objects.filter(status__in=live, heartbeat_at__lt=cutoff).select_related("task_version"):
        same = Run.objects.filter(pk=run.pk, status=run.status, attempt=run.attempt, heartbeat_at__lt=cutoff)
        with transaction.atomic():
            if run.attempt < max_attempts:
                if same.update(status=Run.Status.QUEUED, worker="", live_action="", live_output=""):
                    run_enqueue(run)
                    requeued.append(run.pk)
            elif same.update(
                status=Run.Status.FAILED,
                failure_kind=Run.FailureKind.INFRASTRUCTURE,
                error=f"the worker executing this run stopped responding, {run.attempt} times; gave up",
                finished_at=timezone.now(),
            ):
                fail_validation_if_needed(run)
                failed.append(run.pk)
    return {"requeued": requeued, "failed": failed}


@transaction.atomic
def run_fork(*, run: Run, step_index: int, agent: Agent | None = None, model: str | None = None) -> Run:
    """A new run that starts from this run's workspace after step ``step_index`` and knows steps 0..N."""
    steps = list(run.steps.filter(index__lte=step_index).order_by("index"))
    if not steps or steps[-1].index != step_index:
        raise RunRequestError(f"run {run.pk} has no step {step_index}")
    fork = Run.objects.create(
        task=run.task,
        task_version=run.task_version,
        agent=agent or run.agent,
        model=run.model if model is None else model,
        purpose=Run.Purpose.BENCHMARK,
        sandbox=settings.BENCH_SANDBOX,
        max_steps=run.max_steps,
        max_time_s=run.max_time_s,
        max_tokens=run.max_tokens,
        max_cost=run.max_cost,
        forked_from=run,
        fork_step=step_index,
        initial_snapshot=run.initial_snapshot,
        steps_count=len(steps),
    )
    copied = []
    for step in steps:
        step.pk = None
        step.run = fork
        step.inherited = True
        copied.append(step)
    Step.objects.bulk_create(copied)
    run_enqueue(fork)
    return fork


def run_again(*, run: Run) -> Run:
    """A fresh run of the same agent, model, task version and limits."""
    with transaction.atomic():
        return run_create(
            task=run.task,
            agent=run.agent,
            model=run.model,
            version=run.task_version,
            max_steps=run.max_steps,
            max_time_s=run.max_time_s,
            max_tokens=run.max_tokens,
            max_cost=run.max_cost,
        )


def run_steps_score_queue(*, run: Run) -> int:
    """Queue the evaluation of every distinct workspace snapshot of the run's steps (one job each)."""
    from .tasks import score_step

    seen: set[str] = set()
    jobs = []
    for step in run.steps.order_by("index").only("pk", "snapshot", "score"):
        if step.snapshot and step.snapshot not in seen and step.score is None:
            seen.add(step.snapshot)
            jobs.append(step.pk)
    for pk in jobs:
        transaction.on_commit(lambda pk=pk: score_step.delay(pk))
    return len(jobs)
