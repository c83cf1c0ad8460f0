"""The leaderboard's statistics as pure functions: the database counts and sums each group of runs (see
selectors.py); these turn those counts and sums into the rates and means shown, and rank the groups. No queries
here, so each figure can be checked against one worked out by hand."""

from __future__ import annotations

from decimal import Decimal
from functools import cache
from math import atan, ceil, cos, floor, pi, sin, sqrt
from random import Random

Number = int | float | Decimal

#: The normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054


def success_rate(*, successes: int, runs: int) -> float | None:
    """The paper's success rate: the share of runs that beat the baseline by the threshold; None without runs."""
    return successes / runs if runs else None


def mean(*, total: Number | None, count: int) -> Number | None:
    """The mean of ``count`` values that sum to ``total``; None when there are none (a missing value, such as
    the improvement of a run that was never scored, is neither in the total nor in the count)."""
    if not count or total is None:
        return None
    return total / count


def wilson_interval(*, successes: int, runs: int, z: float = Z95) -> tuple[float, float] | None:
    """The 95% Wilson score interval of a success rate: the rates p for which ``successes`` of ``runs`` is not
    surprising, (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n). Unlike p ± z·sqrt(p(1-p)/n) it is never
    [0, 0] at 0 of n nor [1, 1] at n of n, and stays inside [0, 1]. None without runs."""
    if not runs:
        return None
    rate = successes / runs
    spread = z * z / runs
    centre = (rate + spread / 2) / (1 + spread)
    half = z * sqrt(rate * (1 - rate) / runs + spread / (4 * runs)) / (1 + spread)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == runs else min(1.0, centre + half)
    return low, high


def _t_two_sided(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with ``df`` (a whole number) degrees of freedom, by the closed form for whole
    degrees of freedom (Abramowitz and Stegun 26.7.3 and 26.7.4)."""
    theta = atan(t / sqrt(df))
    c2 = cos(theta) ** 2
    if df % 2:  # odd: 2/pi (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ... up to cos^(df-3)))
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return 2 / pi * (theta + sin(theta) * cos(theta) * total)
    term, total = 1.0, 1.0  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ... up to cos^(df-2))
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return sin(theta) * total


#: From this many degrees of freedom on, ``t_quantile95`` takes the Cornish-Fisher expansion (off by under 1e-9
#: there) instead of bisecting the exact distribution, whose cost grows with the degrees of freedom.
T_EXPANSION_FROM = 200


@cache
def t_quantile95(df: int) -> float:
    """The t value a two-sided 95% interval uses with ``df`` degrees of freedom (12.706 at 1, 2.262 at 9,
    tending to 1.960), found by bisection on the exact distribution function; from ``T_EXPANSION_FROM`` degrees of
    freedom on, by the Cornish-Fisher expansion of t around the normal quantile (Abramowitz and Stegun 26.7.5)."""
    if df >= T_EXPANSION_FROM:
        z = Z95
        return (
            z
            + (z**3 + z) / (4 * df)
            + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
            + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * df**4)
        )
    low, high = 0.0, 1000.0
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_two_sided(middle, df) < 0.95 else (low, middle)
    return (low + high) / 2


def mean_interval(*, mean: float | None, sd: float | None, count: int) -> tuple[float, float] | None:
    """The 95% Student t interval of a mean: mean ± t(count-1) · sd / sqrt(count), with ``sd`` the sample
    standard deviation (n - 1 in the denominator). It assumes the values are independent and roughly normal or
    numerous; None with fewer than two values, where the spread is unknown."""
    if mean is None or sd is None or count < 2:
        return None
    half = t_quantile95(count - 1) * float(sd) / sqrt(count)
    return float(mean) - half, float(mean) + half


def entrant_stats(sums: dict) -> dict:
    """The figures of one agent version and model (over all tasks, or one task) from the database's sums:
    ``runs``, ``successes``, ``scored`` (runs with an improvement), ``improvement_sum``, ``cost_sum``,
    ``tokens_sum``, ``seconds_sum`` and ``steps_sum``, ``improvement_sd`` (the sample standard deviation of the
    improvements, when the database gave it), and ``normalised_sum`` over ``normalised_count`` runs (when given)."""
    runs = sums["runs"]
    mean_improvement = mean(total=sums["improvement_sum"], count=sums["scored"])
    return {
        "success_rate": success_rate(successes=sums["successes"], runs=runs),
        "any_step_rate": success_rate(successes=sums.get("any_step_successes", 0), runs=runs),
        "success_interval": wilson_interval(successes=sums["successes"], runs=runs),
        "mean_improvement": mean_improvement,
        "improvement_interval": mean_interval(
            mean=mean_improvement, sd=sums.get("improvement_sd"), count=sums["scored"]
        ),
        "mean_cost": mean(total=sums["cost_sum"], count=runs),
        "mean_tokens": mean(total=sums["tokens_sum"], count=runs),
        "mean_seconds": mean(total=sums["seconds_sum"], count=runs),
        "mean_steps": mean(total=sums["steps_sum"], count=runs),
        # 0 = the baseline, 1 = the task's reference score; over the runs with a final score on a task that has one.
        "mean_normalised": mean(total=sums.get("normalised_sum"), count=sums.get("normalised_count", 0)),
    }


def ranking_key(row: dict) -> tuple:
    """Sort key of a leaderboard row: the higher success rate first (a row without one last), then the higher
    mean improvement (a row with none after the rows with one), then agent name, version and model, so that ties
    keep one order."""
    improvement = row["mean_improvement"]
    return (
        row["success_rate"] is None,  # a row with no counted run (only infrastructure failures) comes last
        -(row["success_rate"] or 0.0),
        improvement is None,
        -(improvement or 0.0),
        row["agent__name"],
        row["agent__version"],
        row["model"],
    )


def rate_label(*, successes: int, runs: int) -> str:
    """A success rate as the tables show it, with its 95% Wilson interval and its n: "37.5% [13.7–69.4] n=8";
    "— n=0" without runs."""
    interval = wilson_interval(successes=successes, runs=runs)
    if interval is None:
        return "— n=0"
    low, high = interval
    return f"{100 * successes / runs:.1f}% [{100 * low:.1f}–{100 * high:.1f}] n={runs}"


def mean_label(*, mean: Number | None, interval: tuple[float, float] | None, count: int) -> str:
    """A mean improvement (a fraction) as the tables show it: "12.3% [-4.1, 20.5] n=5"; without an interval (fewer
    than two values) "12.3% n=1"; "—" without a value."""
    if mean is None:
        return "—"
    around = f" [{100 * interval[0]:.1f}, {100 * interval[1]:.1f}]" if interval else ""  # a comma: bounds can be < 0
    return f"{100 * float(mean):.1f}%{around} n={count}"


def pareto_frontier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (cost, success) points no other point beats on both: none costs as little or less and succeeds as
    often or more, with one of the two strictly. Ordered by cost, so the success rises along the frontier."""
    frontier: list[tuple[float, float]] = []
    for cost, rate in sorted(set(points), key=lambda p: (p[0], -p[1])):
        if not frontier or rate > frontier[-1][1]:
            frontier.append((cost, rate))
    return frontier


def paired_difference(tasks: list[tuple[int, int, int, int]], *, resamples: int = 2000, seed: int = 0) -> dict | None:
    """How much more often A succeeds than B on the tasks both ran, each task weighing the same: the mean over
    tasks of A's success rate minus B's. ``tasks`` holds, per task, (A's successes, A's runs, B's successes,
    B's runs). None without a task in common.

    The 95% interval comes from draws, seeded so a page shows the same interval every time: each of ``resamples``
    times, each side's success rate on each task is drawn from what its runs there allow (a Beta distribution with
    Jeffreys' prior: successes + 1/2, failures + 1/2; the tasks stay fixed: the question is about these tasks), and
    the mean difference is recomputed; the interval runs from the 2.5th to the 97.5th percentile of those
    differences. A side that succeeded on all of its few runs, or none, is still uncertain: three runs of 3 out of
    3 do not say the rate is 1 (a percentile bootstrap, which redraws the runs themselves, would give the interval
    [estimate, estimate] there). A side with one run on a task has too little to draw from: there is no interval
    then (``interval`` None, ``fewest_runs`` saying why)."""
    if not tasks:
        return None
    fewest = min(min(na, nb) for _, na, _, nb in tasks)

    def difference(rates: list[tuple[float, float]]) -> float:
        return sum(a - b for a, b in rates) / len(rates)

    estimate = difference([(sa / na, sb / nb) for sa, na, sb, nb in tasks])
    rng = Random(seed)

    def redraw(successes: int, runs: int) -> float:
        return rng.betavariate(successes + 0.5, runs - successes + 0.5)

    interval = None
    if fewest >= 2:
        draws = sorted(
            difference([(redraw(sa, na), redraw(sb, nb)) for sa, na, sb, nb in tasks]) for _ in range(resamples)
        )
        interval = (draws[floor(0.025 * resamples)], draws[ceil(0.975 * resamples) - 1])
    return {
        "difference": estimate, "interval": interval, "fewest_runs": fewest, "tasks": len(tasks),
        "resamples": resamples, "seed": seed,
    }  # fmt: skip


HOLDS, DIFFERS, TOO_FEW = "holds", "differs", "too few runs to say"
#: Fewer counted runs than this on a task, on either side, and there is no spread to tell a difference from noise
#: (``paired_difference`` gives no interval below 2 runs a side, as the compare page shows).
REPRODUCTION_RUNS_LEAST = 2


def reproduction_verdict(tasks: dict[str, tuple[int, int, int, int]]) -> dict:
    """Whether a reproduction holds, by the rule docs/reproductions.md states. ``tasks`` holds, per task of the
    original, (the reproduction's successes, its counted runs, the original's successes, its counted runs).

    Per task, and over all tasks (each task weighing the same), the reproduction's success rate minus the original's
    with its 95% interval (``paired_difference``, the compare page's). A task is "too few runs to say" when either
    side has fewer than ``REPRODUCTION_RUNS_LEAST`` counted runs on it, else "differs" when its interval excludes
    0, else "holds". Overall: too few when any task is (the row's number is over all its tasks), else differs when
    the overall interval or any task's excludes 0, else holds."""
    per_task = {}
    for task, (sa, na, sb, nb) in sorted(tasks.items()):
        few = min(na, nb) < REPRODUCTION_RUNS_LEAST
        result = None if min(na, nb) < 1 else paired_difference([(sa, na, sb, nb)])
        per_task[task] = {"verdict": TOO_FEW if few else _interval_verdict(result), "result": result}
    if not per_task or any(t["verdict"] == TOO_FEW for t in per_task.values()):
        usable = [counts for counts in tasks.values() if min(counts[1], counts[3]) >= 1]
        return {"verdict": TOO_FEW, "result": paired_difference(usable), "tasks": per_task, "needs": _needs(tasks)}
    overall = paired_difference(list(tasks.values()))
    differs = _interval_verdict(overall) == DIFFERS or any(t["verdict"] == DIFFERS for t in per_task.values())
    return {"verdict": DIFFERS if differs else HOLDS, "result": overall, "tasks": per_task}


def _needs(tasks: dict[str, tuple[int, int, int, int]]) -> str:
    """What a verdict of too few runs waits for: the counted runs each side lacks on each task."""
    least = REPRODUCTION_RUNS_LEAST
    if not tasks:
        return "a task the original has counted runs on"
    lacking = [
        f"{task}: {least - runs} more {side} run{'s' if least - runs > 1 else ''}"
        for task, (_, again, _, original) in sorted(tasks.items())
        for side, runs in (("reproduction", again), ("original", original))
        if runs < least
    ]
    return f"at least {least} counted runs on both sides of every task ({'; '.join(lacking)})"


def _interval_verdict(result: dict) -> str:
    low, high = result["interval"]
    return HOLDS if low <= 0 <= high else DIFFERS
