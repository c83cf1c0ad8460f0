"""Writes for runs: create, cancel, fork, run again, queue step scoring."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from task_bank.models import Task, TaskVersion

from .jobs import run_enqueue, runs_enqueue, step_score_enqueue
from .models import Agent, Batch, ModelEndpoint, ReviewTag, Run, RunLimits, RunSpec, Step, Submission
from .selectors import storage_refusal

NO_LIMITS = RunLimits()


class RunRequestError(Exception):
    """A run cannot be created as asked; the message says why and what would work."""


def agent_resolve(spec: str, *, among: QuerySet[Agent] | None = None) -> Agent:
    """An agent by "name" (its newest version) or "name@version", of ``among`` (default: all agents); the error
    lists the valid ones (of ``among`` only: a submitter is never told the names of others' private agents)."""
    among = Agent.objects.all() if among is None else among
    name, _, version = spec.partition("@")
    agents = among.filter(name=name, **({"version": version} if version else {}))
    agent = agents.order_by("-created_at").first()
    if agent is None:
        valid = sorted({f"{a.name}@{a.version}" for a in among.only("name", "version")})
        raise RunRequestError(f"unknown agent {spec!r}; valid agents: {', '.join(valid) or 'none'}")
    return agent


def model_check(spec: RunSpec) -> None:
    """An agent that uses an LLM needs a configured, enabled model endpoint; the others need none. A fast or edit
    model is one more endpoint the run may use, so it needs a main model beside it."""
    configured = sorted(ModelEndpoint.objects.filter(is_enabled=True).values_list("name", flat=True))
    names = ", ".join(configured) or "none yet (add one in the admin or BENCH_MODEL_ENDPOINTS)"
    for given in (spec.model, spec.fast_model, spec.edit_model):
        if given and given not in configured:
            raise RunRequestError(f"no enabled model endpoint named {given!r}; configured: {names}")
    if spec.agent.uses_llm and not spec.model:
        name = spec.agent.name
        raise RunRequestError(f"agent {name} uses an LLM: give it a model (--model NAME); configured: {names}")
    if (spec.fast_model or spec.edit_model) and not spec.model:
        raise RunRequestError("a fast or edit model needs a main model too (--model NAME)")


def run_create(
    *,
    task: Task,
    agent: Agent,
    model: str = "",
    fast_model: str = "",
    edit_model: str = "",
    batch: Batch | None = None,
    purpose: str = Run.Purpose.BENCHMARK,
    version: TaskVersion | None = None,
    limits: RunLimits = NO_LIMITS,
    enqueue: bool = True,
    demo: bool = False,
) -> Run:
    """A queued run (sent to a worker once the transaction commits, unless ``enqueue`` is False: then the caller
    executes it). Limits left out are the task's own (steps, time) or none (tokens, cost). A ``demo`` run goes to
    the demo's queue (``Run.queue_for``)."""
    version = runnable_version(task=task, version=version, purpose=purpose)
    spec = run_spec_check(RunSpec(agent, model, fast_model, edit_model, limits))
    run = Run.objects.create(
        batch=batch,
        sent_at=None if enqueue else timezone.now(),
        **run_fields(task=task, version=version, spec=spec, purpose=purpose, demo=demo),
    )
    if enqueue:
        run_enqueue(run)
    return run


def runnable_version(*, task: Task, version: TaskVersion | None, purpose: str) -> TaskVersion:
    """The task version a new run would use (``version`` or the task's current one), if it may take runs."""
    version = version or task.current_version
    if version is None:
        raise RunRequestError(f"task {task.slug} has no files yet; import a task package first")
    if not task.is_enabled and purpose == Run.Purpose.BENCHMARK:
        raise RunRequestError(f"task {task.slug} is retired and takes no new runs")
    if version.status == TaskVersion.Status.FAILED and purpose == Run.Purpose.BENCHMARK:
        raise RunRequestError(
            f"task {task.slug} v{version.number} failed validation and cannot run:\n{version.validation_log}"
        )
    return version


def run_spec_check(spec: RunSpec) -> RunSpec:
    """Check the limits and the models of new runs; the spec they use, with its main model filled in (a built-in
    agent's default when none is given: an uploaded package's default_model names no model for the platform to pay
    for)."""
    agent = spec.agent
    if agent.kind == Agent.Kind.EXTERNAL:
        raise RunRequestError(
            f"agent {agent} has no code here: it only names the agent of runs imported from logs made elsewhere"
        )
    if agent.smoke_state == Agent.Smoke.FAILED:
        raise RunRequestError(agent.smoke_refusal)
    try:
        spec.limits.check()
    except ValueError as exc:
        raise RunRequestError(str(exc)) from None
    spec = replace(spec, model=spec.model or (agent.default_model if agent.is_trusted else ""))
    model_check(spec)
    return spec


def run_fields(*, task: Task, version: TaskVersion, spec: RunSpec, purpose: str, demo: bool = False) -> dict:
    """A new run's fields: its task version, its spec (the task's own limits where it leaves them out)."""
    return {
        "task": task,
        "task_version": version,
        **spec.as_fields(),
        "purpose": purpose,
        "queue": Run.queue_for(version=version, demo=demo),
        "sandbox": settings.BENCH_SANDBOX,
        **spec.limits.for_version(version).as_fields(),
    }


def batch_request_check(
    *, spec: RunSpec, tasks: list[Task], repeats: int
) -> tuple[list[Task], list[TaskVersion], RunSpec]:
    """Check a request for ``repeats`` runs of ``spec`` on each task; the tasks (a task named twice counts once, in
    its first place), the versions their runs would use, and the spec checked. RunRequestError names what is
    wrong."""
    tasks = list(dict.fromkeys(tasks))
    if repeats < 1:
        raise RunRequestError("repeats must be at least 1")
    if not tasks:
        raise RunRequestError("name at least one task")
    most = settings.BENCH_MAX_RUNS_PER_REQUEST
    if len(tasks) * repeats > most:
        raise RunRequestError(
            f"{len(tasks)} task(s) x {repeats} repeat(s) would make {len(tasks) * repeats} runs; at most {most} "
            f"runs per request (BENCH_MAX_RUNS_PER_REQUEST)"
        )
    versions = [runnable_version(task=task, version=None, purpose=Run.Purpose.BENCHMARK) for task in tasks]
    return tasks, versions, run_spec_check(spec)


def batch_record(
    *,
    spec: RunSpec,
    tasks: list[Task],
    repeats: int,
    created_by: AbstractBaseUser | None,
    note: str = "",
) -> Batch:
    """The batch that records what was asked (checked already: ``batch_request_check``), without its runs."""
    batch = Batch.objects.create(
        **spec.as_fields(), **spec.limits.as_fields(), repeats=repeats, note=note, created_by=created_by
    )
    batch.tasks.set(tasks)
    return batch


@transaction.atomic
def batch_create(
    *,
    spec: RunSpec,
    tasks: list[Task],
    repeats: int = 1,
    enqueue: bool = True,
    note: str = "",
    created_by: AbstractBaseUser | None = None,
    batch: Batch | None = None,
    demo: bool = False,
) -> tuple[Batch, list[Run]]:
    """``repeats`` queued runs of ``spec`` on each task (a task named twice counts once, in its first place),
    written together; at most ``BENCH_MAX_RUNS_PER_REQUEST`` runs, and none unless every task can take them.
    The batch records what was asked; an approved submission passes its own ``batch`` to get its runs; the first
    start's demo asks for ``demo`` runs (``Run.queue_for``). An agent
    whose smoke test has not passed gets none, nor one whose owner's runs store all they may."""
    if spec.agent.smoke_refusal:
        raise RunRequestError(spec.agent.smoke_refusal)
    if refusal := storage_refusal(owner_id=spec.agent.owner_id, adding=1):  # a new run must have room for a file
        raise RunRequestError(refusal)
    tasks, versions, spec = batch_request_check(spec=spec, tasks=tasks, repeats=repeats)
    if batch is None:
        batch = batch_record(spec=spec, tasks=tasks, repeats=repeats, note=note, created_by=created_by)
        if created_by is not None:  # staff's request, approved as it is made
            Submission.objects.create(batch=batch, approval=Submission.Approval.APPROVED)
    fields = [
        run_fields(task=task, version=version, spec=spec, purpose=Run.Purpose.BENCHMARK, demo=demo)
        for task, version in zip(tasks, versions, strict=True)
    ]
    sent_at = None if enqueue else timezone.now()  # not enqueued: the caller executes them itself
    runs = Run.objects.bulk_create(Run(batch=batch, sent_at=sent_at, **f) for f in fields for _ in range(repeats))
    if enqueue:
        runs_enqueue(runs)
    return batch, runs


@transaction.atomic
def batch_plan_create(*, batch: Batch, enqueue: bool = True) -> list[Run]:
    """The runs of a batch that names them exactly (``Batch.plan``: a reproduction of recorded runs): for each item,
    ``runs`` runs of its task version with its fast and edit models and limits, of the batch's agent and model,
    purpose ``Run.Purpose.REPRODUCTION`` (never ranked). Checked as any batch is (the agent may run, the task takes
    runs, the models are enabled endpoints, at most ``BENCH_MAX_RUNS_PER_REQUEST`` runs); RunRequestError says why
    not, and no run is written then."""
    agent = batch.agent
    if agent.smoke_refusal:
        raise RunRequestError(agent.smoke_refusal)
    if refusal := storage_refusal(owner_id=agent.owner_id, adding=1):
        raise RunRequestError(refusal)
    total = sum(int(item["runs"]) for item in batch.plan)
    if not batch.plan or total < 1:
        raise RunRequestError("the batch's plan names no run")
    if total > settings.BENCH_MAX_RUNS_PER_REQUEST:
        raise RunRequestError(
            f"the plan makes {total} runs; at most {settings.BENCH_MAX_RUNS_PER_REQUEST} runs per request "
            f"(BENCH_MAX_RUNS_PER_REQUEST)"
        )
    versions = TaskVersion.objects.select_related("task").in_bulk([item["version"] for item in batch.plan])
    runs = []
    for item in batch.plan:
        version = versions.get(item["version"])
        if version is None:
            raise RunRequestError(f"task version {item['version']} is gone")
        version = runnable_version(task=version.task, version=version, purpose=Run.Purpose.BENCHMARK)
        limits = RunLimits(
            max_steps=item["max_steps"],
            max_time_s=item["max_time_s"],
            max_tokens=item["max_tokens"],
            max_cost=None if item["max_cost"] is None else Decimal(item["max_cost"]),
        )
        spec = run_spec_check(RunSpec(agent, batch.model, item["fast_model"], item["edit_model"], limits))
        fields = run_fields(task=version.task, version=version, spec=spec, purpose=Run.Purpose.REPRODUCTION)
        sent_at = None if enqueue else timezone.now()
        runs += [Run(batch=batch, sent_at=sent_at, **fields) for _ in range(int(item["runs"]))]
    runs = Run.objects.bulk_create(runs)
    if enqueue:
        runs_enqueue(runs)
    return runs


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
            if run.batch_id is not None:  # the rest of its round is not needed any more
                Run.objects.filter(batch_id=run.batch_id, status=Run.Status.QUEUED).update(
                    status=Run.Status.CANCELLED,
                    cancel_requested_at=now,
                    finished_at=now,
                    error="cancelled with its round",
                )
            TaskVersion.objects.filter(pk=run.task_version_id, status=TaskVersion.Status.VALIDATING).update(
                status=TaskVersion.Status.PENDING, validation_log="validation was cancelled before it started"
            )
        return True
    return bool(Run.objects.live().filter(pk=run.pk, cancel_requested_at__isnull=True).update(cancel_requested_at=now))


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
        fast_model=run.fast_model if model is None else "",
        edit_model=run.edit_model if model is None else "",
        purpose=Run.Purpose.BENCHMARK,
        queue=Run.queue_for(version=run.task_version),
        sandbox=settings.BENCH_SANDBOX,
        **run.limits.as_fields(),
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
            fast_model=run.fast_model,
            edit_model=run.edit_model,
            version=run.task_version,
            limits=run.limits,
        )


def run_steps_score_queue(*, run: Run) -> int:
    """Queue the evaluation of every distinct workspace snapshot of the run's steps (one job each)."""
    seen: set[str] = set()
    jobs = []
    for step in run.steps.order_by("index").only("pk", "snapshot", "score"):
        if step.snapshot and step.snapshot not in seen and step.score is None:
            seen.add(step.snapshot)
            jobs.append(step.pk)
    for pk in jobs:
        step_score_enqueue(pk)
    return len(jobs)


COMMENT_MAX = 2000


def review_tag_add(
    *, run: Run, kind: str, author: AbstractBaseUser, step_index: int | None = None, comment: str = ""
) -> ReviewTag:
    """A reviewer's tag on a run, or on one of its steps. RunRequestError names what was wrong."""
    if kind not in ReviewTag.REVIEWED:
        choices = ", ".join(str(k) for k in ReviewTag.REVIEWED)
        raise RunRequestError(f"unknown failure mode {kind!r}; expected one of {choices}")
    if len(comment) > COMMENT_MAX:
        raise RunRequestError(f"the comment is {len(comment)} characters; at most {COMMENT_MAX}")
    step = None
    if step_index is not None:
        step = Step.objects.filter(run=run, index=step_index).first()
        if step is None:
            raise RunRequestError(f"run {run.pk} has no step {step_index}")
    return ReviewTag.objects.create(run=run, step=step, kind=kind, author=author, comment=comment.strip())


def review_tag_remove(*, tag: ReviewTag, user: AbstractBaseUser) -> None:
    """Remove a reviewer's tag: its author's or, for staff, anyone's; automatic tags stay (the trace shows them)."""
    if tag.automatic:
        raise RunRequestError("an automatic tag says what the trace shows; it cannot be removed")
    if tag.author_id != user.pk and not user.is_staff:
        raise RunRequestError("only its author or staff can remove a tag")
    tag.delete()
