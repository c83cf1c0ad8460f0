"""Reads for rankings: the database counts and sums, stats.py turns the sums into rates and means. Every read of
runs goes through runner's access rule, so a private agent's runs count only for its owner and staff."""

from __future__ import annotations

from django.db.models import Count, F, Max, Min, Q, QuerySet, Sum

from runner.models import Run
from runner.selectors import Viewer, agents_visible_filter, runs_list, runs_visible_to
from task_bank.models import Task, TaskVersion

from .stats import entrant_stats, ranking_key

ENTRANT = ("agent__name", "agent__version", "model")


def home_counts(*, viewer: Viewer) -> dict:
    """Benchmark runs the viewer may see: all of them, the live ones, the finished ones and the successes."""
    return (
        runs_visible_to(viewer)
        .filter(purpose=Run.Purpose.BENCHMARK)
        .aggregate(
            total=Count("pk"),
            live=Count("pk", filter=Q(status__in=Run.LIVE)),
            finished=Count("pk", filter=Q(status=Run.Status.FINISHED)),
            succeeded=Count("pk", filter=Q(succeeded=True)),
        )
    )


def home_page(*, viewer: Viewer) -> dict:
    """What the home page shows: the run counts, the number of enabled tasks and the ten newest runs."""
    return {
        "counts": home_counts(viewer=viewer),
        "task_count": Task.objects.filter(is_enabled=True).count(),
        "recent_runs": runs_list(viewer=viewer)[:10],
    }


def tasks_list(*, viewer: Viewer, include_retired: bool = False) -> QuerySet[Task]:
    """Tasks with their current version, the number of runs on it and the best and worst final scores, over
    the runs the viewer may see."""
    on_current = Q(runs__task_version=F("current_version"), runs__purpose=Run.Purpose.BENCHMARK)
    on_current &= agents_visible_filter(viewer, through="runs__agent__")
    qs = Task.objects.select_related("current_version").annotate(
        run_count=Count("runs", filter=on_current),
        score_max=Max("runs__final_score", filter=on_current),
        score_min=Min("runs__final_score", filter=on_current),
    )
    if not include_retired:
        qs = qs.filter(is_enabled=True)
    return qs.order_by("category", "slug")


def task_detail(*, slug: str) -> Task:
    """A task that has files (a current version); ``Task.DoesNotExist`` otherwise."""
    return Task.objects.select_related("current_version").get(slug=slug, current_version__isnull=False)


def task_versions(*, task: Task) -> QuerySet[TaskVersion]:
    return task.versions.order_by("-number")


def _sums() -> dict:
    """What the database counts and sums for each group of runs; stats.entrant_stats makes the figures."""
    return {
        "runs": Count("pk"),
        "successes": Count("pk", filter=Q(succeeded=True)),
        "scored": Count("improvement"),
        "improvement_sum": Sum("improvement"),
        "cost_sum": Sum("cost"),
        "tokens_sum": Sum(F("tokens_in") + F("tokens_out")),
        "seconds_sum": Sum("wall_seconds"),
        "steps_sum": Sum("steps_count"),
    }


SUMS_ONLY = {"scored", "improvement_sum", "cost_sum", "tokens_sum", "seconds_sum", "steps_sum"}


def _with_figures(group: dict) -> dict:
    """A group's row: its columns and counts, then its figures; the sums they came from are left out."""
    return {k: v for k, v in group.items() if k not in SUMS_ONLY} | entrant_stats(group)


def task_agent_rows(*, viewer: Viewer, version: TaskVersion) -> list[dict]:
    """The per-task leaderboard: one row per agent version and model, over benchmark runs of this version
    that ended (finished, failed or timed out; cancelled runs do not count)."""
    groups = (
        runs_visible_to(viewer)
        .filter(task_version=version, purpose=Run.Purpose.BENCHMARK, status__in=Run.RANKED)
        .values(*ENTRANT)
        .annotate(**_sums(), best=(Max if version.higher_is_better else Min)("final_score"))
        .order_by()
    )
    return sorted((_with_figures(g) for g in groups), key=ranking_key)


def _ranked_runs(*, viewer: Viewer, current_only: bool) -> QuerySet[Run]:
    qs = runs_visible_to(viewer).filter(purpose=Run.Purpose.BENCHMARK, status__in=Run.RANKED, task__is_enabled=True)
    if current_only:
        qs = qs.filter(task_version=F("task__current_version"))
    return qs


def leaderboard_rows(*, viewer: Viewer, current_only: bool = True) -> list[dict]:
    """One row per agent version and model over every enabled task: the paper's success rate (runs that beat
    the baseline by the threshold), mean improvement, and efficiency (cost, tokens, time)."""
    groups = (
        _ranked_runs(viewer=viewer, current_only=current_only)
        .values(*ENTRANT)
        .annotate(tasks=Count("task", distinct=True), **_sums())
        .order_by()
    )
    return sorted((_with_figures(g) for g in groups), key=ranking_key)


def leaderboard_cells(*, viewer: Viewer, current_only: bool = True) -> list[dict]:
    """Success rate and mean improvement per agent version, model and task (the paper's per-task table)."""
    groups = (
        _ranked_runs(viewer=viewer, current_only=current_only)
        .values(*ENTRANT, "task__slug")
        .annotate(**_sums())
        .order_by("task__slug", "agent__name")
    )
    return [_with_figures(g) for g in groups]


def leaderboard_matrix(*, viewer: Viewer, current_only: bool = True) -> dict:
    """The leaderboard page's table: its rows, the tasks that have runs, and for each row its cell on each task
    (None where it has no runs there); the cells as a list too, for the chart."""
    rows = leaderboard_rows(viewer=viewer, current_only=current_only)
    cells = leaderboard_cells(viewer=viewer, current_only=current_only)
    tasks = sorted({c["task__slug"] for c in cells})
    by_place = {(*(c[k] for k in ENTRANT), c["task__slug"]): c for c in cells}
    matrix = [
        {"row": row, "cells": [by_place.get((*(row[k] for k in ENTRANT), task)) for task in tasks]} for row in rows
    ]
    return {"rows": rows, "cells": cells, "tasks": tasks, "matrix": matrix}
