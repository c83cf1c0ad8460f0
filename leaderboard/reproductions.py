"""Reads of reproductions: which ones a viewer may see, and each one's comparison with its original, task by task
and overall, with the verdict (``stats.reproduction_verdict``; the rule: docs/reproductions.md). The database
counts and sums each side's runs per task (``sums.run_sums``, the leaderboard's own sums), so a reproduction's
figures are the leaderboard's figures of the same runs."""

from __future__ import annotations

from django.db.models import Count, F, Max, Min, Q, QuerySet, Sum

from runner.models import Run, Submission
from runner.selectors import Viewer, agents_visible_filter
from task_bank.models import TaskVersion

from .models import Reproduction
from .stats import TOO_FEW, reproduction_verdict
from .sums import ADDED, added, run_sums, sample_sd, with_figures


def reproductions_visible(viewer: Viewer) -> QuerySet[Reproduction]:
    """The reproductions of the agents ``viewer`` may see (the runs' access rule), newest first."""
    return (
        Reproduction.objects.filter(agents_visible_filter(viewer, through="agent__"))
        .select_related("agent", "batch__agent", "source_run")
        .order_by("-created_at", "-pk")
    )


def _add(into: dict, group: dict) -> dict:
    """``group``'s counts and sums added to ``into``'s."""
    for name in ADDED:
        into[name] = added(into.get(name), group[name])
    return into


def _summed(groups: list[dict]) -> dict[str, dict]:
    """Per task slug, ``groups`` (of ``run_sums``, each with its task's slug) added up."""
    side: dict[str, dict] = {}
    for group in groups:
        _add(side.setdefault(group["task__slug"], {"task__slug": group["task__slug"]}), group)
    return side


def _total(groups: list[dict]) -> dict | None:
    if not groups:
        return None
    total: dict = {}
    for group in groups:
        _add(total, group)
    return with_figures(total)


def reproduction_comparisons(reproductions: list[Reproduction]) -> dict[int, dict]:
    """Per reproduction (its pk), its original and itself side by side: per task of either (``tasks``: each side's
    figures, the difference of success rates, reproduction minus original, with its interval and the task's
    verdict) and over all tasks (``original``, ``reproduction``, ``result``), the ``verdict`` once every run of its
    batch has ended (before: where the batch is, in words) and ``state``, the batch's. Four queries for them all:
    the runs each re-runs, their sums (per run, since one run may be the original of several), the batches' sums
    and the batches' counts."""
    if not reproductions:
        return {}
    counted = run_sums(counted=Run.COUNTED, scores=Q())
    pairs = Reproduction.original_runs.through.objects.filter(reproduction__in=reproductions)
    originals: dict[int, list[int]] = {}
    for reproduction_id, run_id in pairs.values_list("reproduction_id", "run_id"):
        originals.setdefault(reproduction_id, []).append(run_id)
    runs = Run.objects.filter(pk__in={pk for pks in originals.values() for pk in pks})
    per_run = {row["pk"]: row for row in runs.values("pk", "task__slug").annotate(**counted).order_by()}
    batches = [reproduction.batch_id for reproduction in reproductions]
    per_batch: dict[int, list[dict]] = {}
    for row in Run.objects.filter(batch__in=batches).values("batch", "task__slug").annotate(**counted).order_by():
        per_batch.setdefault(row["batch"], []).append(row)
    submissions = (
        Submission.objects.filter(pk__in=batches)
        .select_related("batch__agent")
        .annotate(
            total=Count("batch__runs"),
            queued=Count("batch__runs", filter=Q(batch__runs__status=Run.Status.QUEUED)),
            ended=Count("batch__runs", filter=Q(batch__runs__status__in=Run.ENDED)),
        )
    )
    states = {s.pk: s.state_of(runs=s.total, queued=s.queued, ended=s.ended) for s in submissions}
    comparisons = {}
    for reproduction in reproductions:
        original = _summed([per_run[pk] for pk in originals.get(reproduction.pk, [])])
        again = _summed(per_batch.get(reproduction.batch_id, []))
        comparisons[reproduction.pk] = _comparison(original, again, states[reproduction.batch_id])
    return comparisons


def reproduction_comparison(reproduction: Reproduction) -> dict:
    """``reproduction_comparisons`` of one."""
    return reproduction_comparisons([reproduction])[reproduction.pk]


def _comparison(original: dict[str, dict], again: dict[str, dict], state: str) -> dict:
    counts = {
        slug: (again[slug]["successes"] if slug in again else 0, again[slug]["runs"] if slug in again else 0,
               group["successes"], group["runs"])
        for slug, group in original.items()
    }  # fmt: skip
    judged = reproduction_verdict(counts)
    tasks = []
    for slug in sorted(set(original) | set(again)):
        per_task = judged["tasks"].get(slug, {"verdict": TOO_FEW, "result": None})
        tasks.append(
            {
                "task": slug,
                "original": with_figures(original[slug]) if slug in original else None,
                "reproduction": with_figures(again[slug]) if slug in again else None,
                "verdict": per_task["verdict"],
                "result": per_task["result"],
            }
        )
    ended = state == Submission.State.DONE
    return {
        "tasks": tasks,
        "original": _total(list(original.values())),
        "reproduction": _total(list(again.values())),
        "result": judged["result"],
        "state": state,
        "state_label": Submission.State(state).label,
        "ended": ended,
        "verdict": judged["verdict"] if ended else Submission.State(state).label.lower(),
        "needs": judged.get("needs", "") if ended else "",  # what a verdict of too few runs waits for
    }


def latest_reproductions(*, viewer: Viewer) -> dict[tuple, dict]:
    """Per leaderboard row (agent name, version, model), its newest reproduction of the row (not of one of its runs)
    that ``viewer`` may see:
    {"id", "verdict", "exact"}. Two queries, then their comparisons (``reproduction_comparisons``: four)."""
    newest = (
        Reproduction.objects.filter(agents_visible_filter(viewer, through="agent__"), source_run__isnull=True)
        .values("agent", "model")
        .annotate(last=Max("pk"))
        .values_list("last", flat=True)
    )
    shown = list(reproductions_visible(viewer).filter(pk__in=newest))
    comparisons = reproduction_comparisons(shown)
    latest = {}
    for reproduction in shown:
        key = (reproduction.agent.name, reproduction.agent.version, reproduction.model)
        latest[key] = {
            "id": reproduction.pk,
            "verdict": comparisons[reproduction.pk]["verdict"],
            "exact": reproduction.exact,
        }
    return latest


#: The built-in agent that runs the starter code unchanged: its reproductions measure a task's own noise.
BASELINE_AGENT = "baseline"
#: How many of the baseline's newest reproductions of a task the task page looks through for one that has ended.
NOISE_LOOKS = 5


def task_noise(*, viewer: Viewer, version: TaskVersion) -> dict | None:
    """A task version's run-to-run spread, from the newest ended reproduction of the baseline agent on it: over
    the counted runs of both sides there, the sample standard deviation of the improvement, its range and count,
    the reproduction's verdict on the task, and whether the spread reaches the success threshold (``noisy``: twice
    the standard deviation at or above it, so the unchanged starter code could pass the threshold by chance; the
    rule: docs/reproductions.md). None without one."""
    baseline = reproductions_visible(viewer).filter(agent__name=BASELINE_AGENT)
    if not baseline.exists():  # most sites' most tasks: no join over the runs at all
        return None
    touching = Q(batch__runs__task_version=version) | Q(original_runs__task_version=version)
    candidates = baseline.filter(touching).distinct()
    for reproduction in candidates[:NOISE_LOOKS]:
        comparison = reproduction_comparison(reproduction)
        if not comparison["ended"]:
            continue
        sides = Q(pk__in=reproduction.original_runs.values("pk")) | Q(batch=reproduction.batch)
        runs = Run.objects.filter(sides, Run.COUNTED, task_version=version, improvement__isnull=False)
        sums = runs.aggregate(
            n=Count("pk"),
            total=Sum("improvement"),
            squares=Sum(F("improvement") * F("improvement")),
            low=Min("improvement"),
            high=Max("improvement"),
        )
        sd = sample_sd(sums["squares"], sums["n"], sums["total"])
        task = next((t for t in comparison["tasks"] if t["task"] == version.task.slug), None)
        return {
            "reproduction": reproduction,
            "runs": sums["n"],
            "sd": sd,
            "low": sums["low"],
            "high": sums["high"],
            "verdict": task["verdict"] if task else TOO_FEW,
            "threshold": version.success_threshold,
            "noisy": sd is not None and 2 * sd >= version.success_threshold,
        }
    return None
