"""The counts and sums that rankings and reproductions make per group of runs, and the figures made from them
(stats.py turns the sums into rates and means)."""

from __future__ import annotations

from math import sqrt

from django.db.models import Avg, Case, Count, Exists, F, FloatField, Func, Max, Min, OuterRef, Q, Subquery, Sum, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, Greatest, Least, NullIf

from runner.models import Agent, Run, Step

from .stats import Number, entrant_stats

#: The baseline a run's score is measured against: the one measured alongside it (a timed task's), else its version's.
BASELINE = Coalesce("paired_baseline", "task_version__baseline_score")
#: A run's normalised score where its task version has a reference score: 0 at the baseline, 1 at the reference,
#: in either metric direction ((score - baseline) / (reference - baseline)); None without a final score or a
#: reference, or where the reference equals the baseline.
NORMALISED = (F("final_score") - BASELINE) / NullIf(F("task_version__reference_score") - BASELINE, 0.0)


#: plot.py's threshold of success: an improvement above 10 %.
PLOT_SUCCESS = 0.10


def plot_baseline() -> Case:
    """A run's baseline as MLAgentBench's plot.py sets it, per task version: a baseline the task declares for always;
    else, where the built-in baseline agent has runs its tables count, the mean of their final scores above 0 (NULL,
    plot.py's NaN, when none is: no run of that task improves); else the declared baseline, else the measured one."""
    baseline_runs = Run.objects.filter(
        Run.MLAGENTBENCH_COUNTED,
        task_version=OuterRef("task_version"),
        agent__kind=Agent.Kind.BUILTIN,
        agent__name="baseline",
        purpose=Run.Purpose.BENCHMARK,
        origin=Run.Origin.VERIFIED,
    )
    measured = baseline_runs.filter(final_score__gt=0).order_by().values("task_version")
    declared = KeyTextTransform("baseline", "task_version__manifest")
    fixed = Cast(KeyTextTransform("score", declared), FloatField())
    return Case(
        When(task_version__manifest__baseline__when="always", then=fixed),
        When(Exists(baseline_runs), then=Subquery(measured.annotate(mean=Avg("final_score")).values("mean")[:1])),
        default=Coalesce(fixed, F("task_version__baseline_score")),
        output_field=FloatField(),
    )


def plot_improvement(score: str = "final_score", baseline: str = "plot_baseline") -> Case:
    """A run's improvement over an annotated plot.py baseline, in the metric's direction (NULL without one)."""
    change = (F(score) - F(baseline)) / F(baseline)
    return Case(When(task_version__higher_is_better=True, then=change), default=-change, output_field=FloatField())


def plot_best_score(kept: Q) -> Case:
    """A run's best score above 0 as plot.py takes it for "success at any point" (its ``max_score``, or
    ``min_score`` where lower is better): over its scored steps and its final score where ``kept`` keeps it."""
    steps = Step.objects.filter(run=OuterRef("pk"), score__gt=0).order_by().values("run")
    final = Case(When(kept & Q(final_score__gt=0), then=F("final_score")), output_field=FloatField())

    def best(aggregate: type, pick: type) -> Func:
        step = Subquery(steps.annotate(best=aggregate("score")).values("best")[:1], output_field=FloatField())
        return pick(Coalesce(step, final), Coalesce(final, step))  # the other where one is missing

    return Case(
        When(task_version__higher_is_better=True, then=best(Max, Greatest)),
        default=best(Min, Least),
        output_field=FloatField(),
    )


def run_sums(
    *,
    counted: Q,
    scores: Q,
    improvement: str = "improvement",
    succeeded: Q | None = None,
    any_step: Q | None = None,
) -> dict:
    """What the database counts and sums for each group of runs, over its ``counted`` runs (their scores where
    ``scores`` says they count); the infrastructure failures are counted apart whether or not they are included.
    ``improvement`` names each run's improvement; ``succeeded`` and ``any_step`` say which runs succeeded at the end
    and at some step (the stored ones, or plot.py's: ``plot_improvement``). stats.entrant_stats makes the figures."""
    scored = counted & scores
    succeeded = Q(succeeded=True) if succeeded is None else succeeded
    any_step = Q(improved_any_step=True) if any_step is None else any_step
    return {
        "runs": Count("pk", filter=counted),
        "successes": Count("pk", filter=scored & succeeded),
        # plot.py's "success at any point": some scored step (the final one included) beat the baseline.
        "any_step_successes": Count("pk", filter=counted & any_step),
        "infrastructure_failures": Count("pk", filter=Run.INFRASTRUCTURE_FAILURE),
        "scored": Count(improvement, filter=scored),
        "improvement_sum": Sum(improvement, filter=scored),
        # The spread from the sum of squares, in Python (with_figures): SQLite's sample deviation fails on one run.
        "improvement_squares": Sum(F(improvement) * F(improvement), filter=scored),
        "cost_sum": Sum("cost", filter=counted),
        "tokens_sum": Sum(F("tokens_in") + F("tokens_out"), filter=counted),
        "seconds_sum": Sum("wall_seconds", filter=counted),
        "steps_sum": Sum("steps_count", filter=counted),
        "normalised_count": Count(NORMALISED, filter=scored),
        "normalised_sum": Sum(NORMALISED, filter=scored),
    }


SUMS_ONLY = {
    "improvement_sum",
    "improvement_sd",
    "improvement_squares",
    "cost_sum",
    "tokens_sum",
    "seconds_sum",
    "steps_sum",
    "normalised_sum",
}


def sample_sd(squares: Number | None, n: int, total: Number | None) -> float | None:
    """The sample standard deviation of ``n`` values from their sum of squares and their sum (None below 2)."""
    if n < 2 or squares is None or total is None:
        return None
    return sqrt(max(0.0, (squares - total * total / n) / (n - 1)))


def with_figures(group: dict) -> dict:
    """A group's row: its columns and counts, then its figures; the sums they came from are left out."""
    group = {
        **group,
        "improvement_sd": sample_sd(group["improvement_squares"], group["scored"], group["improvement_sum"]),
    }
    return {k: v for k, v in group.items() if k not in SUMS_ONLY} | entrant_stats(group)


#: The counts and sums that a row adds up over its cells.
ADDED = ("runs", "successes", "any_step_successes", "infrastructure_failures", "scored", "normalised_count")
ADDED += tuple(sorted(SUMS_ONLY - {"improvement_sd"}))  # improvement_squares among them


def added(a: Number | None, b: Number | None) -> Number | None:
    """A sum of two sums, either of which may be missing (SQL's SUM over no value is NULL)."""
    return a if b is None else b if a is None else a + b
