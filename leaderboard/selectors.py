"""Reads for rankings: the database counts and sums, stats.py turns the sums into rates and means. Every read of
runs goes through runner's access rule, so a private agent's runs count only for its owner and staff."""

from __future__ import annotations

from django.db.models import Count, F, Max, Min, Q, QuerySet, StdDev, Sum

from runner.models import Run
from runner.selectors import Viewer, agents_visible_filter, runs_list, runs_visible_to
from task_bank.models import Task, TaskVersion

from .stats import entrant_stats, paired_difference, ranking_key

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


def _sums(*, counted: Q) -> dict:
    """What the database counts and sums for each group of runs, over its ``counted`` runs; the infrastructure
    failures are counted apart whether or not they are included. stats.entrant_stats makes the figures."""
    return {
        "runs": Count("pk", filter=counted),
        "successes": Count("pk", filter=counted & Q(succeeded=True)),
        "infrastructure_failures": Count("pk", filter=Run.INFRASTRUCTURE_FAILURE),
        "scored": Count("improvement", filter=counted),
        "improvement_sum": Sum("improvement", filter=counted),
        "improvement_sd": StdDev("improvement", sample=True, filter=counted),
        "cost_sum": Sum("cost", filter=counted),
        "tokens_sum": Sum(F("tokens_in") + F("tokens_out"), filter=counted),
        "seconds_sum": Sum("wall_seconds", filter=counted),
        "steps_sum": Sum("steps_count", filter=counted),
    }


SUMS_ONLY = {"improvement_sum", "improvement_sd", "cost_sum", "tokens_sum", "seconds_sum", "steps_sum"}


def _with_figures(group: dict) -> dict:
    """A group's row: its columns and counts, then its figures; the sums they came from are left out."""
    return {k: v for k, v in group.items() if k not in SUMS_ONLY} | entrant_stats(group)


def counted_runs(*, viewer: Viewer, include_infrastructure: bool = False) -> tuple[QuerySet[Run], Q]:
    """The one rule of what rankings count, as the runs to group and the filter of those that count.

    Counted: trials (benchmark runs started afresh: no validation run, no fork, which re-runs a step of another
    run) that ended finished, failed by the agent, or at a limit (timed out included). Not counted: cancelled
    runs, and infrastructure failures, which are read too so that each row can show how many it had, and which
    ``include_infrastructure`` counts as failed runs, to show what they would change."""
    counted = Run.COUNTED | Run.INFRASTRUCTURE_FAILURE if include_infrastructure else Run.COUNTED
    runs = runs_visible_to(viewer).filter(Run.TRIAL).filter(Run.COUNTED | Run.INFRASTRUCTURE_FAILURE)
    return runs, counted


def task_agent_rows(*, viewer: Viewer, version: TaskVersion, include_infrastructure: bool = False) -> list[dict]:
    """The per-task leaderboard: one row per agent version and model, over the runs of this version that
    rankings count (``counted_runs``)."""
    runs, counted = counted_runs(viewer=viewer, include_infrastructure=include_infrastructure)
    best = (Max if version.higher_is_better else Min)("final_score", filter=counted)
    groups = runs.filter(task_version=version).values(*ENTRANT).annotate(**_sums(counted=counted), best=best)
    return sorted((_with_figures(g) for g in groups.order_by()), key=ranking_key)


def _ranked_runs(*, viewer: Viewer, current_only: bool, include_infrastructure: bool) -> tuple[QuerySet[Run], Q]:
    runs, counted = counted_runs(viewer=viewer, include_infrastructure=include_infrastructure)
    runs = runs.filter(task__is_enabled=True)
    if current_only:
        runs = runs.filter(task_version=F("task__current_version"))
    return runs, counted


def leaderboard_rows(*, viewer: Viewer, current_only: bool = True, include_infrastructure: bool = False) -> list[dict]:
    """One row per agent version and model over every enabled task: the paper's success rate (runs that beat
    the baseline by the threshold), mean improvement, and efficiency (cost, tokens, time), over the runs that
    rankings count (``counted_runs``)."""
    runs, counted = _ranked_runs(
        viewer=viewer, current_only=current_only, include_infrastructure=include_infrastructure
    )
    groups = (
        runs.values(*ENTRANT)
        .annotate(tasks=Count("task", distinct=True, filter=counted), **_sums(counted=counted))
        .order_by()
    )
    return sorted((_with_figures(g) for g in groups), key=ranking_key)


def leaderboard_cells(*, viewer: Viewer, current_only: bool = True, include_infrastructure: bool = False) -> list[dict]:
    """Success rate and mean improvement per agent version, model and task (the paper's per-task table)."""
    runs, counted = _ranked_runs(
        viewer=viewer, current_only=current_only, include_infrastructure=include_infrastructure
    )
    groups = (
        runs.values(*ENTRANT, "task__slug")
        .annotate(**_sums(counted=counted))
        .filter(runs__gt=0)
        .order_by("task__slug", "agent__name")
    )
    return [_with_figures(g) for g in groups]


def leaderboard_matrix(*, viewer: Viewer, current_only: bool = True, include_infrastructure: bool = False) -> dict:
    """The leaderboard page's table: its rows, the tasks that have runs, and for each row its cell on each task
    (None where it has no runs there); the cells as a list too, for the chart."""
    options = {"current_only": current_only, "include_infrastructure": include_infrastructure}
    rows = leaderboard_rows(viewer=viewer, **options)
    cells = leaderboard_cells(viewer=viewer, **options)
    tasks = sorted({c["task__slug"] for c in cells})
    by_place = {(*(c[k] for k in ENTRANT), c["task__slug"]): c for c in cells}
    matrix = [
        {"row": row, "cells": [by_place.get((*(row[k] for k in ENTRANT), task)) for task in tasks]} for row in rows
    ]
    return {"rows": rows, "cells": cells, "tasks": tasks, "matrix": matrix}


def leaderboard_row_export(row: dict) -> dict:
    """A leaderboard row as the API and the JSON and CSV exports give it: plain names, numbers as floats,
    intervals as [low, high]."""
    out = {"agent": row["agent__name"], "agent_version": row["agent__version"], "model": row["model"]}
    for key, value in row.items():
        if key in ENTRANT or key == "task__slug":
            continue
        if isinstance(value, tuple):
            value = [float(v) for v in value]
        elif value is not None and key.startswith("mean"):
            value = float(value)
        out[key] = value
    return out


def entrant_key(row: dict) -> str:
    """A row's name in a URL: "agent@version", then "/model" when it has one."""
    model = f"/{row['model']}" if row["model"] else ""
    return f"{row['agent__name']}@{row['agent__version']}{model}"


def entrant_parse(key: str) -> dict:
    """The row a key names (``entrant_key``'s inverse); ValueError when it is not "agent@version[/model]"."""
    name, at, rest = key.partition("@")
    version, _, model = rest.partition("/")
    if not (name and at and version):
        raise ValueError(f"{key!r} names no row: expected agent@version or agent@version/model")
    return {"agent__name": name, "agent__version": version, "model": model}


def leaderboard_compare(
    *, viewer: Viewer, a: dict, b: dict, current_only: bool = True, include_infrastructure: bool = False
) -> dict:
    """Two rows side by side on the tasks both ran (each task's counts and rates, from the runs the leaderboard
    counts), the tasks only one of them ran, and A's success rate minus B's over the shared tasks with its
    interval (stats.paired_difference)."""
    runs, counted = _ranked_runs(
        viewer=viewer, current_only=current_only, include_infrastructure=include_infrastructure
    )
    groups = (
        runs.filter(Q(**a) | Q(**b))
        .values(*ENTRANT, "task__slug")
        .annotate(**_sums(counted=counted))
        .filter(runs__gt=0)
        .order_by("task__slug")
    )
    sides: dict[str, dict] = {"a": {}, "b": {}}
    for group in groups:
        entrant = {k: group[k] for k in ENTRANT}
        for side, wanted in (("a", a), ("b", b)):
            if entrant == wanted:
                sides[side][group["task__slug"]] = _with_figures(group)
    shared = sorted(set(sides["a"]) & set(sides["b"]))
    pairs = [{"task": t, "a": sides["a"][t], "b": sides["b"][t]} for t in shared]
    for pair in pairs:
        pair["difference"] = pair["a"]["success_rate"] - pair["b"]["success_rate"]
    counts = [(p["a"]["successes"], p["a"]["runs"], p["b"]["successes"], p["b"]["runs"]) for p in pairs]
    return {
        "pairs": pairs,
        "only_a": sorted(set(sides["a"]) - set(shared)),
        "only_b": sorted(set(sides["b"]) - set(shared)),
        "result": paired_difference(counts),
    }
