"""Reads for rankings: the database counts and sums, stats.py turns the sums into rates and means. Every read of
runs goes through runner's access rule, so a private agent's runs count only for its owner and staff."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import connection
from django.db.models import Aggregate, Avg, Count, F, FloatField, Max, Min, Q, QuerySet

from runner.models import ReviewTag, Run, Step
from runner.selectors import Viewer, queue_positions_fill, runs_list, runs_rows, runs_visible_to
from task_bank.models import Task, TaskVersion
from task_bank.selectors import tasks_shown

from .cache import ranking_cached
from .query import DEFAULT_OPTIONS, MLAGENTBENCH, MLAGENTBENCH_GPT4, PLOT_COUNTINGS, RankingOptions, board_sort
from .reproductions import latest_reproductions
from .stats import paired_difference, ranking_key
from .sums import (
    ADDED,
    PLOT_SUCCESS,
    added,
    plot_baseline,
    plot_best_score,
    plot_improvement,
    run_sums,
    with_figures,
)

ENTRANT = ("agent__name", "agent__version", "model")


def home_counts(*, viewer: Viewer) -> dict:
    """What the home page counts of the runs the viewer may see: the runs the leaderboard counts (``ranked_runs``:
    trials of the current versions of enabled tasks that ended finished, failed by the agent or at a limit) and how
    many of them succeeded, and the runs not ended yet, validation rounds too, as the runs list shows them: running
    (on a worker) and queued (a trial counts once it ends)."""

    def compute() -> dict:
        runs, counted = ranked_runs(viewer=viewer)
        return runs.aggregate(
            counted=Count("pk", filter=counted), succeeded=Count("pk", filter=counted & Q(succeeded=True))
        )

    counts = ranking_cached("home_counts", viewer=viewer, options=DEFAULT_OPTIONS, compute=compute)
    live = runs_visible_to(viewer).live()
    now = live.aggregate(running=Count("pk", filter=Q(status__in=Run.ON_WORKER)), live=Count("pk"))
    counts["running"], counts["queued"] = now["running"], now["live"] - now["running"]
    return counts


def home_page(*, viewer: Viewer) -> dict:
    """What the home page shows: the run counts, the number of enabled tasks and the ten newest runs."""
    return {
        "counts": home_counts(viewer=viewer),
        "task_count": Task.objects.filter(is_enabled=True).count(),
        "recent_runs": queue_positions_fill(list(runs_rows(runs_list(viewer=viewer))[:10])),
    }


def tasks_list(*, viewer: Viewer, include_retired: bool = False) -> QuerySet[Task]:
    """Tasks with their current version, and over the runs of it that the leaderboard counts (``counted_runs``,
    of the runs the viewer may see) their number and the best and worst final scores. A task whose current version
    failed validation is staff's to see (``tasks_shown``)."""
    runs, counted = counted_runs(viewer=viewer)
    on_current = Q(runs__task_version=F("current_version"), runs__in=runs.filter(counted).values("pk"))
    qs = Task.objects.select_related("current_version").annotate(
        run_count=Count("runs", filter=on_current),
        score_max=Max("runs__final_score", filter=on_current),
        score_min=Min("runs__final_score", filter=on_current),
    )
    if not include_retired:
        qs = qs.filter(is_enabled=True)
    return tasks_shown(qs, viewer=viewer).order_by("category", "slug")


def task_detail(*, slug: str, viewer: Viewer) -> Task:
    """A task that has files (a current version) and that ``viewer`` may see; ``Task.DoesNotExist`` otherwise."""
    tasks = tasks_shown(Task.objects.select_related("current_version"), viewer=viewer)
    return tasks.get(slug=slug, current_version__isnull=False)


def task_versions(*, task: Task) -> QuerySet[TaskVersion]:
    return task.versions.order_by("-number")


def scores_counted(options: RankingOptions) -> Q:
    """Which counted runs' final scores count: every one, or under MLAgentBench's counting only those above 0 (its
    plot.py takes any other as no score: the run counts, as not succeeded, and has no improvement). Under the rule of
    its GPT-4 runs, a run that ended in an error of its own has no score either (it left no final files)."""
    if options.counting == MLAGENTBENCH_GPT4:
        return Run.MLAGENTBENCH_COUNTED & Q(final_score__gt=0)
    return Q(final_score__gt=0) if options.counting == MLAGENTBENCH else Q()


def counted_runs(*, viewer: Viewer, options: RankingOptions = DEFAULT_OPTIONS) -> tuple[QuerySet[Run], Q]:
    """The one rule of what rankings count, as the runs to group and the filter of those that count.

    Counted: trials (benchmark runs started afresh: no validation run, no fork, which re-runs a step of another
    run) that ended finished, failed by the agent, or at a limit (timed out included). Not counted: cancelled
    runs, and infrastructure failures, which are read too so that each row can show how many it had, and which
    ``options.include_infrastructure`` counts as failed runs, to show what they would change. Only runs the
    platform executed and scored (``.verified()``) unless ``options.include_self_reported``: runs imported from
    logs made elsewhere then count too, once scored here (``.judged()``).
    (Which tasks and versions: ``ranked_runs``.) Under MLAgentBench's counting (``options.counting``) only what its
    tables count (``Run.MLAGENTBENCH_COUNTED``), with the scores ``scores_counted`` keeps."""
    if options.counting == MLAGENTBENCH:  # what its tables count; infrastructure failures never
        counted = Run.MLAGENTBENCH_COUNTED
    elif options.counting == MLAGENTBENCH_GPT4:  # its GPT-4 runs: those that ended in an error kept too
        counted = Run.COUNTED | Run.INFRASTRUCTURE_FAILURE
    else:
        counted = Run.COUNTED | Run.INFRASTRUCTURE_FAILURE if options.include_infrastructure else Run.COUNTED
    runs = runs_visible_to(viewer).trials().read_by_rankings()
    # Self-reported runs count once scored here (an upload's run waits for its score; a log without a workspace
    # has none, whatever the log says it scored).
    runs = runs.judged() if options.include_self_reported else runs.verified()
    if options.counting in PLOT_COUNTINGS:  # improvements against plot.py's baseline
        runs = runs.annotate(plot_baseline=plot_baseline(), plot_best=plot_best_score(scores_counted(options)))
        runs = runs.annotate(
            plot_improvement=plot_improvement(), plot_best_improvement=plot_improvement(score="plot_best")
        )
    return runs, counted


def improvement_of(options: RankingOptions) -> str:
    """The name of a counted run's improvement as ``options`` count (``counted_runs`` annotates plot.py's)."""
    return "plot_improvement" if options.counting in PLOT_COUNTINGS else "improvement"


def sums_of(counted: Q, options: RankingOptions) -> dict:
    """``run_sums`` as ``options`` count: under MLAgentBench's counting, improvements and successes against plot.py's
    baseline (``counted_runs`` annotates them), its 10 % threshold, and only the scores it keeps."""
    improvement = improvement_of(options)
    if improvement == "plot_improvement":
        return run_sums(
            counted=counted,
            scores=scores_counted(options),
            improvement=improvement,
            succeeded=Q(plot_improvement__gt=PLOT_SUCCESS),
            any_step=Q(plot_best_improvement__gt=PLOT_SUCCESS),
        )
    return run_sums(counted=counted, scores=Q())


def task_agent_rows(*, viewer: Viewer, version: TaskVersion, options: RankingOptions = DEFAULT_OPTIONS) -> list[dict]:
    """The per-task leaderboard: one row per agent version and model, over the runs of this version that
    rankings count (``counted_runs``)."""
    runs, counted = counted_runs(viewer=viewer, options=options)
    best = (Max if version.higher_is_better else Min)("final_score", filter=counted & scores_counted(options))
    groups = runs.filter(task_version=version).values(*ENTRANT).annotate(**sums_of(counted, options), best=best)
    return sorted((with_figures(g) for g in groups.order_by()), key=ranking_key)


def ranked_runs(*, viewer: Viewer, options: RankingOptions = DEFAULT_OPTIONS) -> tuple[QuerySet[Run], Q]:
    """``counted_runs`` on the leaderboard's tasks: the enabled ones (of one ``options.category`` if given), only
    the runs of each task's current version if ``options.current_only``. What the leaderboard, its exports and API,
    the home page's counts and the charts all read, so that every number and every chart point stands for the
    same runs."""
    runs, counted = counted_runs(viewer=viewer, options=options)
    runs = runs.filter(task__is_enabled=True)
    if options.current_only:
        runs = runs.filter(task_version=F("task__current_version"))
    if options.category:
        runs = runs.filter(task__category=options.category)
    return runs, counted


def leaderboard_cell_groups(*, viewer: Viewer, options: RankingOptions = DEFAULT_OPTIONS) -> list[dict]:
    """The leaderboard's one aggregation: ``run_sums`` per agent version, model and task, over ``ranked_runs``, the
    groups with only infrastructure failures included (``runs`` 0: their row still shows how many it had). The
    rows and the cells are both made from these groups, so they always add up."""
    runs, counted = ranked_runs(viewer=viewer, options=options)
    groups = runs.values(*ENTRANT, "task__slug").annotate(**sums_of(counted, options))
    return list(groups.order_by("task__slug", "agent__name", "agent__version", "model"))


def _rows_from_groups(groups: list[dict]) -> list[dict]:
    """One row per entrant from its per-task groups (``leaderboard_cell_groups``): each count and sum added up over
    the tasks, ``tasks`` the tasks where it has counted runs, and the sample standard deviation of all its
    improvements from their count, sum and sum of squares; ranked (``ranking_key``)."""
    totals: dict[tuple, dict] = {}
    for group in groups:
        key = tuple(group[k] for k in ENTRANT)
        total = totals.setdefault(key, {**dict(zip(ENTRANT, key, strict=True)), "tasks": 0})
        total["tasks"] += group["runs"] > 0
        for name in ADDED:
            total[name] = added(total.get(name), group[name])
    return sorted((with_figures(total) for total in totals.values()), key=ranking_key)


def _cells_from_groups(groups: list[dict]) -> list[dict]:
    """The per-task cells: the groups with counted runs, as rows of one task."""
    return [with_figures(g) for g in groups if g["runs"]]


def leaderboard_board(*, viewer: Viewer, options: RankingOptions = DEFAULT_OPTIONS) -> tuple[list[dict], list[dict]]:
    """The rows and the cells made from ``leaderboard_cell_groups``, computed once per ranking generation
    (``cache.ranking_cached``): every read of the leaderboard's figures goes through here."""

    return ranking_cached("board", viewer=viewer, options=options, compute=lambda: board_computed(viewer, options))


def board_computed(viewer: Viewer, options: RankingOptions) -> tuple[list[dict], list[dict]]:
    """The leaderboard's rows (with their review tag counts) and cells, computed from the runs (no cache)."""
    groups = leaderboard_cell_groups(viewer=viewer, options=options)
    rows = _rows_from_groups(groups)
    tags = leaderboard_tag_counts(viewer=viewer, options=options)
    reproductions = latest_reproductions(viewer=viewer) if rows else {}
    for row in rows:
        row["tags"] = tags.get(tuple(row[k] for k in ENTRANT), [])
        row["reproduction"] = reproductions.get(tuple(row[k] for k in ENTRANT))
    return rows, _cells_from_groups(groups)


def leaderboard_tag_counts(*, viewer: Viewer, options: RankingOptions = DEFAULT_OPTIONS) -> dict[tuple, list[dict]]:
    """Per agent version and model, how many of its counted runs carry each review tag (on the run or on one of
    its steps), the most frequent first: [{"kind", "label", "runs"}]. One query."""
    runs, counted = ranked_runs(viewer=viewer, options=options)
    tagged = (
        ReviewTag.objects.filter(run__in=runs.filter(counted))
        .values(*(f"run__{k}" for k in ENTRANT), "kind")
        .annotate(runs=Count("run", distinct=True))
        .order_by()
    )
    labels = dict(ReviewTag.Kind.choices)
    counts: dict[tuple, list[dict]] = {}
    for group in tagged:
        key = tuple(group[f"run__{k}"] for k in ENTRANT)
        counts.setdefault(key, []).append(
            {"kind": group["kind"], "label": labels[group["kind"]], "runs": group["runs"]}
        )
    for tags in counts.values():
        tags.sort(key=lambda tag: (-tag["runs"], tag["label"]))
    return counts


def leaderboard_rows(*, viewer: Viewer, options: RankingOptions = DEFAULT_OPTIONS) -> list[dict]:
    """One row per agent version and model over every enabled task: the paper's success rate (runs that beat
    the baseline by the threshold), mean improvement, mean normalised score, and efficiency (cost, tokens, time),
    over the runs that rankings count (``counted_runs``); ranked (``ranking_key``). Added up from the per-task
    groups of ``leaderboard_cell_groups``."""
    return leaderboard_board(viewer=viewer, options=options)[0]


def leaderboard_cells(*, viewer: Viewer, options: RankingOptions = DEFAULT_OPTIONS) -> list[dict]:
    """Success rate, mean improvement and mean normalised score per agent version, model and task (the paper's
    per-task table)."""
    return leaderboard_board(viewer=viewer, options=options)[1]


def leaderboard_matrix(
    *,
    viewer: Viewer,
    options: RankingOptions = DEFAULT_OPTIONS,
    sort: str = "",
) -> dict:
    """The leaderboard page's table: its rows in the order ``sort`` asks for (``query.board_sort``; the ranking
    without it), the tasks that have runs, and for each row its cell on each task (None where it has no runs
    there); the cells as a list too, for the charts. Rows and cells come from the same groups, once per ranking
    generation (``leaderboard_board``)."""
    rows, cells = leaderboard_board(viewer=viewer, options=options)
    tasks = sorted({c["task__slug"] for c in cells})
    by_entrant: dict[tuple, dict] = {}
    for cell in cells:
        by_entrant.setdefault(tuple(cell[k] for k in ENTRANT), {})[cell["task__slug"]] = cell
    lines = []
    for row in rows:
        by_task = by_entrant.get(tuple(row[k] for k in ENTRANT), {})
        lines.append({"row": row, "cells": [by_task.get(task) for task in tasks], "cells_by_task": by_task})
    matrix = board_sort(lines, sort=sort)
    return {"rows": [line["row"] for line in matrix], "cells": cells, "tasks": tasks, "matrix": matrix}


def leaderboard_improvements(*, viewer: Viewer, options: RankingOptions = DEFAULT_OPTIONS) -> list[dict]:
    """The improvement of every counted run that has one, with its entrant and task: the points behind each
    cell's mean improvement (the improvement distribution chart); once per ranking generation."""

    def compute() -> list[dict]:
        runs, counted = ranked_runs(viewer=viewer, options=options)
        field = improvement_of(options)
        points = runs.filter(counted, scores_counted(options), **{f"{field}__isnull": False})
        points = points.values(*ENTRANT, "task__slug", field).order_by("task__slug", "pk")
        return [{**point, "improvement": point.pop(field)} for point in points]

    return ranking_cached("improvements", viewer=viewer, options=options, compute=compute)


#: Past this many scored runs on the leaderboard, the improvement chart draws each cell's box from its quartiles
#: (``leaderboard_improvement_boxes``) instead of every run as a point: a page of 100,000 points is megabytes.
IMPROVEMENT_POINTS_MAX = 2000


class Quantiles(Aggregate):
    """PostgreSQL's ``percentile_cont`` of several fractions at once (one sort per group): a list of floats."""

    function = "percentile_cont"
    template = "%(function)s(%(fractions)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression: str, *, fractions: tuple[float, ...], **extra) -> None:
        listed = ", ".join(f"{float(f)!r}" for f in fractions)
        array = f"ARRAY[{listed}]::float8[]"
        super().__init__(expression, fractions=array, output_field=ArrayField(FloatField()), **extra)


def improvement_boxes_possible() -> bool:
    """Whether the database computes quartiles (PostgreSQL); elsewhere the chart takes every point."""
    return connection.vendor == "postgresql"


def leaderboard_improvement_boxes(*, viewer: Viewer, options: RankingOptions = DEFAULT_OPTIONS) -> list[dict]:
    """Per agent version, model and task, the quartiles and the extremes of the improvements of its scored counted
    runs, and their number: the improvement chart's boxes without the points (PostgreSQL only); once per ranking
    generation."""
    return ranking_cached(
        "improvement_boxes",
        viewer=viewer,
        options=options,
        compute=lambda: _improvement_boxes(viewer=viewer, options=options),
    )


def _improvement_boxes(*, viewer: Viewer, options: RankingOptions) -> list[dict]:
    runs, counted = ranked_runs(viewer=viewer, options=options)
    field = improvement_of(options)
    groups = (
        runs.filter(counted, scores_counted(options), **{f"{field}__isnull": False})
        .values(*ENTRANT, "task__slug")
        .annotate(
            quartiles=Quantiles(field, fractions=(0.25, 0.5, 0.75)),
            lowest=Min(field),
            highest=Max(field),
            mean=Avg(field),
            scored=Count("pk"),
        )
        .order_by("task__slug", "agent__name", "agent__version", "model")
    )
    return list(groups)


def task_run_scores(*, viewer: Viewer, version: TaskVersion, options: RankingOptions = DEFAULT_OPTIONS) -> dict:
    """The scores behind a task version's ranking: each counted run's scored steps, in order (``steps``), and
    each counted run's final score (``finals``), with their entrants."""
    runs, counted = counted_runs(viewer=viewer, options=options)
    runs = runs.filter(counted, task_version=version)
    steps = (
        Step.objects.filter(run__in=runs.values("pk"), score__isnull=False)
        .values("run_id", "index", "score", *(f"run__{k}" for k in ENTRANT))
        .order_by("run_id", "index")
    )
    finals = runs.filter(scores_counted(options), final_score__isnull=False)
    finals = finals.values("pk", "steps_count", "final_score", *ENTRANT)
    return {
        "steps": [{k.removeprefix("run__"): v for k, v in step.items()} for step in steps],
        "finals": list(finals.order_by("pk")),
    }


def leaderboard_compare(
    *,
    viewer: Viewer,
    a: dict,
    b: dict,
    options: RankingOptions = DEFAULT_OPTIONS,
) -> dict:
    """Two rows side by side on the tasks both ran (each task's counts and rates, from the runs the leaderboard
    counts), the tasks only one of them ran, and A's success rate minus B's over the shared tasks with its
    interval (stats.paired_difference)."""
    runs, counted = ranked_runs(viewer=viewer, options=options)
    groups = (
        runs.filter(Q(**a) | Q(**b))
        .values(*ENTRANT, "task__slug")
        .annotate(**sums_of(counted, options))
        .filter(runs__gt=0)
        .order_by("task__slug")
    )
    sides: dict[str, dict] = {"a": {}, "b": {}}
    for group in groups:
        entrant = {k: group[k] for k in ENTRANT}
        for side, wanted in (("a", a), ("b", b)):
            if entrant == wanted:
                sides[side][group["task__slug"]] = with_figures(group)
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
