"""Reads for rankings: aggregation happens in the database."""

from __future__ import annotations

from django.db.models import Avg, Count, F, FloatField, Max, Min, Q, QuerySet, Sum
from django.db.models.functions import Cast

from runner.models import Run
from task_bank.models import Task, TaskVersion

ENDED = [Run.Status.FINISHED, Run.Status.FAILED, Run.Status.TIMED_OUT]


def tasks_list(*, include_retired: bool = False) -> QuerySet[Task]:
    """Tasks with their current version, the number of runs on it and the best and worst final scores."""
    on_current = Q(runs__task_version=F("current_version"), runs__purpose=Run.Purpose.BENCHMARK)
    qs = Task.objects.select_related("current_version").annotate(
        run_count=Count("runs", filter=on_current),
        score_max=Max("runs__final_score", filter=on_current),
        score_min=Min("runs__final_score", filter=on_current),
    )
    if not include_retired:
        qs = qs.filter(is_enabled=True)
    return qs.order_by("category", "slug")


def task_agent_rows(*, version: TaskVersion) -> list[dict]:
    """The per-task leaderboard: one row per agent version and model, over benchmark runs of this version
    that ended (finished, failed or timed out; cancelled runs do not count)."""
    rows = (
        Run.objects.filter(task_version=version, purpose=Run.Purpose.BENCHMARK, status__in=ENDED)
        .values("agent__name", "agent__version", "model")
        .annotate(
            runs=Count("pk"),
            successes=Count("pk", filter=Q(succeeded=True)),
            success_rate=Cast(Count("pk", filter=Q(succeeded=True)), FloatField()) / Cast(Count("pk"), FloatField()),
            mean_improvement=Avg("improvement"),
            best=(Max if version.higher_is_better else Min)("final_score"),
            mean_cost=Avg("cost"),
            total_tokens=Sum(F("tokens_in") + F("tokens_out")),
            mean_seconds=Avg("wall_seconds"),
        )
        .order_by("-success_rate", "-mean_improvement")
    )
    return list(rows)


def _ranked_runs(*, current_only: bool) -> QuerySet[Run]:
    qs = Run.objects.filter(purpose=Run.Purpose.BENCHMARK, status__in=ENDED, task__is_enabled=True)
    if current_only:
        qs = qs.filter(task_version=F("task__current_version"))
    return qs


def _aggregates() -> dict:
    return {
        "runs": Count("pk"),
        "successes": Count("pk", filter=Q(succeeded=True)),
        "success_rate": Cast(Count("pk", filter=Q(succeeded=True)), FloatField()) / Cast(Count("pk"), FloatField()),
        "mean_improvement": Avg("improvement"),
        "mean_cost": Avg("cost"),
        "mean_tokens": Avg(F("tokens_in") + F("tokens_out")),
        "mean_seconds": Avg("wall_seconds"),
        "mean_steps": Avg("steps_count"),
    }


def leaderboard_rows(*, current_only: bool = True) -> list[dict]:
    """One row per agent version and model over every enabled task: the paper's success rate (runs that beat
    the baseline by the threshold), mean improvement, and efficiency (cost, tokens, time)."""
    rows = (
        _ranked_runs(current_only=current_only)
        .values("agent__name", "agent__version", "model")
        .annotate(tasks=Count("task", distinct=True), **_aggregates())
        .order_by("-success_rate", "-mean_improvement", "agent__name")
    )
    return list(rows)


def leaderboard_cells(*, current_only: bool = True) -> list[dict]:
    """Success rate and mean improvement per agent version, model and task (the paper's per-task table)."""
    return list(
        _ranked_runs(current_only=current_only)
        .values("agent__name", "agent__version", "model", "task__slug")
        .annotate(**_aggregates())
        .order_by("task__slug", "agent__name")
    )
