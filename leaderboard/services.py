"""Writes of the leaderboard: reproductions of a row or a run (``Reproduction``). What is checked before anything runs,
and which differences refuse a reproduction or only mark it not exact: docs/reproductions.md."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, QuerySet

from core.roles import is_staff, is_submitter
from runner.agents.submissions import submission_decide_at_once
from runner.models import Agent, Batch, LLMCall, ModelEndpoint, Run, Submission
from runner.services import RunRequestError
from task_bank.models import Task, TaskVersion

from .models import Reproduction
from .query import DEFAULT_OPTIONS, RankingOptions
from .selectors import ENTRANT, counted_runs, ranked_runs

#: What the plan copies from each original run, as its runs recorded them.
PLAN_FIELDS = ("fast_model", "edit_model", "max_steps", "max_time_s", "max_tokens", "max_cost")


class ReproductionRefused(RunRequestError):
    """Nothing can run as the original did; ``reasons`` names each part that cannot."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__("cannot reproduce: " + "; ".join(reasons))


@dataclass
class ReproductionCheck:
    """What a reproduction of ``originals`` would run (``plan``: ``Batch.plan``), what refuses it and what would
    not be as the original recorded."""

    plan: list[dict] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    spec: dict = field(default_factory=dict)


def reproduction_check(*, agent: Agent, model: str, originals: QuerySet[Run]) -> ReproductionCheck:
    """Compare what ``originals`` (runs of ``agent`` with ``model``) recorded with what runs would get now.

    Refused (the part cannot run at all): the agent cannot run (no code here, a smoke test not passed); a model
    endpoint the runs named is gone or disabled; a task is retired, or its version to run is not ready; more runs
    than one request may make. Not exact (it runs, and says so): a task version the runs pinned is no longer the
    task's current one (the current one runs instead); an endpoint's model id is not the one the runs' calls
    recorded; the deployment's sandbox kind is not the runs'."""
    check = ReproductionCheck()
    if agent.kind == Agent.Kind.EXTERNAL:
        check.refusals.append(f"agent {agent} has no code here (its runs were imported)")
    elif agent.smoke_state == Agent.Smoke.FAILED:
        check.refusals.append(agent.smoke_refusal)
    groups = list(
        originals.values("task_id", "task_version_id", *PLAN_FIELDS, "sandbox")
        .annotate(runs=Count("pk"))
        .order_by("task_id", "task_version_id", *PLAN_FIELDS)
    )
    if not groups:
        check.refusals.append("there is no counted run to reproduce")
        return check
    tasks = Task.objects.select_related("current_version").in_bulk({g["task_id"] for g in groups})
    versions = TaskVersion.objects.in_bulk({g["task_version_id"] for g in groups})
    for group in groups:
        task, pinned = tasks[group["task_id"]], versions[group["task_version_id"]]
        version = pinned
        if not task.is_enabled:
            check.refusals.append(f"task {task.slug} is retired and takes no new runs")
            continue
        if task.current_version_id != pinned.pk:
            version = task.current_version
            check.differences.append(
                f"task {task.slug} v{pinned.number} ({pinned.digest[:12]}) is no longer its current version: "
                f"v{version.number} ({version.digest[:12]}) runs instead"
            )
        if not version.is_ready:
            check.refusals.append(f"task {task.slug} v{version.number} is {version.get_status_display().lower()}")
            continue
        limits = {name: group[name] for name in PLAN_FIELDS}
        limits["max_cost"] = None if limits["max_cost"] is None else str(limits["max_cost"])
        check.plan.append({"task": task.pk, "version": version.pk, "runs": group["runs"], **limits})
    _endpoints_check(check, model=model, groups=groups, originals=originals)
    sandboxes = sorted({g["sandbox"] for g in groups})
    if sandboxes != [settings.BENCH_SANDBOX]:
        check.differences.append(
            f"the original runs ran in the {', '.join(s or 'unrecorded' for s in sandboxes)} sandbox; "
            f"this deployment's is {settings.BENCH_SANDBOX}"
        )
    total = sum(g["runs"] for g in groups)
    if total > settings.BENCH_MAX_RUNS_PER_REQUEST:
        check.refusals.append(
            f"{total} runs to make; at most {settings.BENCH_MAX_RUNS_PER_REQUEST} per request "
            f"(BENCH_MAX_RUNS_PER_REQUEST)"
        )
    check.spec = {
        "agent": str(agent),
        "agent_digest": agent.package_digest,
        "model": model,
        "runs": total,
        "sandbox": sandboxes,
        "tasks": [
            {
                "task": tasks[g["task_id"]].slug,
                "version": versions[g["task_version_id"]].number,
                "digest": versions[g["task_version_id"]].digest,
                "runs": g["runs"],
                **{name: g[name] if name != "max_cost" or g[name] is None else str(g[name]) for name in PLAN_FIELDS},
            }
            for g in groups
        ],
    }
    return check


def _endpoints_check(check: ReproductionCheck, *, model: str, groups: list[dict], originals: QuerySet[Run]) -> None:
    names = {model} | {g["fast_model"] for g in groups} | {g["edit_model"] for g in groups}
    names.discard("")
    endpoints = {e.name: e for e in ModelEndpoint.objects.filter(name__in=names)}
    for name in sorted(names):
        endpoint = endpoints.get(name)
        if endpoint is None:
            check.refusals.append(f"model endpoint {name} is gone")
        elif not endpoint.is_enabled:
            check.refusals.append(f"model endpoint {name} is disabled")
    recorded = LLMCall.objects.filter(run__in=originals.values("pk")).exclude(endpoint="")
    for name, model_id in recorded.values_list("endpoint", "model").distinct().order_by("endpoint", "model"):
        endpoint = endpoints.get(name)
        if endpoint is not None and endpoint.model_id != model_id:
            check.differences.append(
                f"model endpoint {name} now sends model id {endpoint.model_id!r}; the original runs' calls went to "
                f"{model_id!r}"
            )


def row_originals(
    *, viewer: AbstractBaseUser, entrant: dict, options: RankingOptions = DEFAULT_OPTIONS
) -> QuerySet[Run]:
    """The runs a leaderboard row counts (``ranked_runs``), of the current versions only or of all (as the
    leaderboard was filtered), of one category if given; always the platform's counting of verified runs, with no
    infrastructure failure: a reproduction re-runs what the platform executed."""
    options = RankingOptions(current_only=options.current_only, category=options.category)
    runs, counted = ranked_runs(viewer=viewer, options=options)
    return runs.filter(counted, **entrant)


def run_originals(*, viewer: AbstractBaseUser, run: Run) -> QuerySet[Run]:
    """One run, if rankings count it (``counted_runs``): a cancelled run or an infrastructure failure says nothing."""
    runs, counted = counted_runs(viewer=viewer, options=DEFAULT_OPTIONS)
    return runs.filter(counted, pk=run.pk)


@transaction.atomic
def reproduction_create(
    *, by: AbstractBaseUser, agent: Agent, model: str, originals: QuerySet[Run], source_run: Run | None = None
) -> Reproduction:
    """A reproduction of ``originals``: staff's runs at once; an agent owner's is a submission that waits for staff
    (``runner.agents.submissions``; approved at once with ``BENCH_AUTO_APPROVE_SUBMISSIONS``). ReproductionRefused
    names every part that cannot run as recorded, and nothing is written then."""
    if not is_submitter(by):
        raise RunRequestError("sign in to reproduce a row")
    if not is_staff(by) and agent.owner_id != by.pk:
        raise RunRequestError(f"only staff and the owner of agent {agent.name} reproduce its rows")
    check = reproduction_check(agent=agent, model=model, originals=originals)
    if check.refusals:
        raise ReproductionRefused(check.refusals)
    batch = Batch.objects.create(
        agent=agent,
        model=model,
        repeats=max(item["runs"] for item in check.plan),
        plan=check.plan,
        note=f"reproduction of {source_run and f'run {source_run.pk}' or f'{agent}/{model}'}"[:200],
        created_by=by,
    )
    batch.tasks.set(sorted({item["task"] for item in check.plan}))
    submission = Submission.objects.create(batch=batch)
    reproduction = Reproduction.objects.create(
        batch=batch,
        agent=agent,
        model=model,
        source_run=source_run,
        exact=not check.differences,
        differences=check.differences,
        spec=check.spec,
        created_by=by,
    )
    reproduction.original_runs.set(list(originals.values_list("pk", flat=True)))
    submission_decide_at_once(submission)
    return reproduction


def reproduction_of_row(*, by: AbstractBaseUser, key: dict, options: RankingOptions = DEFAULT_OPTIONS) -> Reproduction:
    """Reproduce the leaderboard row ``key`` names ({"agent__name", "agent__version", "model"}), over the runs it
    counts with ``options`` (``row_originals``)."""
    agent = Agent.objects.filter(name=key["agent__name"], version=key["agent__version"]).first()
    if agent is None:
        raise RunRequestError(f"no agent {key['agent__name']}@{key['agent__version']}")
    originals = row_originals(viewer=by, entrant={k: key[k] for k in ENTRANT}, options=options)
    return reproduction_create(by=by, agent=agent, model=key["model"], originals=originals)


def reproduction_of_run(*, by: AbstractBaseUser, run: Run) -> Reproduction:
    """Reproduce one run: its task version and settings, once."""
    originals = run_originals(viewer=by, run=run)
    return reproduction_create(by=by, agent=run.agent, model=run.model, originals=originals, source_run=run)
