"""The leaderboard's statistics as pure functions: the database counts and sums each group of runs (see
selectors.py); these turn those counts and sums into the rates and means shown, and rank the groups. No queries
here, so each figure can be checked against one worked out by hand."""

from __future__ import annotations

from decimal import Decimal

Number = int | float | Decimal


def success_rate(*, successes: int, runs: int) -> float | None:
    """The paper's success rate: the share of runs that beat the baseline by the threshold; None without runs."""
    return successes / runs if runs else None


def mean(*, total: Number | None, count: int) -> Number | None:
    """The mean of ``count`` values that sum to ``total``; None when there are none (a missing value, such as
    the improvement of a run that was never scored, is neither in the total nor in the count)."""
    if not count or total is None:
        return None
    return total / count


def entrant_stats(sums: dict) -> dict:
    """The figures of one agent version and model (over all tasks, or one task) from the database's sums:
    ``runs``, ``successes``, ``scored`` (runs with an improvement), ``improvement_sum``, ``cost_sum``,
    ``tokens_sum``, ``seconds_sum`` and ``steps_sum``."""
    runs = sums["runs"]
    return {
        "success_rate": success_rate(successes=sums["successes"], runs=runs),
        "mean_improvement": mean(total=sums["improvement_sum"], count=sums["scored"]),
        "mean_cost": mean(total=sums["cost_sum"], count=runs),
        "mean_tokens": mean(total=sums["tokens_sum"], count=runs),
        "mean_seconds": mean(total=sums["seconds_sum"], count=runs),
        "mean_steps": mean(total=sums["steps_sum"], count=runs),
    }


def ranking_key(row: dict) -> tuple:
    """Sort key of a leaderboard row: the higher success rate first, then the higher mean improvement (a row
    with none after the rows with one), then agent name, version and model, so that ties keep one order."""
    improvement = row["mean_improvement"]
    return (
        -(row["success_rate"] or 0.0),
        improvement is None,
        -(improvement or 0.0),
        row["agent__name"],
        row["agent__version"],
        row["model"],
    )
