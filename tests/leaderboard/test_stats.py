"""The leaderboard's statistics, checked against figures worked out by hand."""

from decimal import Decimal

import pytest

from leaderboard.stats import entrant_stats, mean, ranking_key, success_rate


def test_the_success_rate_is_the_share_of_runs_that_succeeded():
    assert success_rate(successes=3, runs=4) == 0.75
    assert success_rate(successes=1, runs=3) == pytest.approx(0.333333, abs=1e-6)
    assert success_rate(successes=0, runs=5) == 0.0
    assert success_rate(successes=7, runs=7) == 1.0


def test_there_is_no_success_rate_without_runs():
    assert success_rate(successes=0, runs=0) is None


def test_a_mean_divides_the_total_by_the_values_that_were_there():
    assert mean(total=0.95, count=4) == pytest.approx(0.2375)  # (0.3 + 0.2 + 0.05 + 0.4) / 4
    assert mean(total=1000, count=4) == 250.0
    assert mean(total=Decimal("0.030000"), count=3) == Decimal("0.01")  # money stays exact


def test_there_is_no_mean_of_nothing():
    assert mean(total=None, count=0) is None
    assert mean(total=0, count=0) is None


def test_an_entrants_figures_come_from_its_counts_and_sums():
    sums = {
        "runs": 4,
        "successes": 3,
        "scored": 3,  # one run was never scored: it has no improvement
        "improvement_sum": 0.9,
        "cost_sum": Decimal("0.100000"),
        "tokens_sum": 1000,
        "seconds_sum": 60.0,
        "steps_sum": 30,
    }

    figures = entrant_stats(sums)

    assert figures["success_rate"] == 0.75  # 3 of 4
    assert figures["mean_improvement"] == pytest.approx(0.3)  # 0.9 over the 3 scored runs, not 4
    assert figures["mean_cost"] == Decimal("0.025")  # 0.10 / 4
    assert figures["mean_tokens"] == 250.0
    assert figures["mean_seconds"] == 15.0
    assert figures["mean_steps"] == 7.5


def test_an_entrant_with_no_scored_run_has_no_mean_improvement():
    sums = dict.fromkeys(["scored", "tokens_sum", "steps_sum"], 0) | {"runs": 2, "successes": 0}
    sums |= {"improvement_sum": None, "cost_sum": Decimal(0), "seconds_sum": 3.0}

    figures = entrant_stats(sums)

    assert figures["success_rate"] == 0.0 and figures["mean_improvement"] is None
    assert figures["mean_cost"] == 0 and figures["mean_seconds"] == 1.5


def test_rows_rank_by_success_rate_then_improvement_then_name_and_unscored_rows_come_last_among_equals():
    def row(name, rate, improvement, model=""):
        return {
            "agent__name": name,
            "agent__version": "1",
            "model": model,
            "success_rate": rate,
            "mean_improvement": improvement,
        }

    rows = [
        row("tied-b", 0.5, 0.1),
        row("unscored", 0.5, None),
        row("better", 0.5, 0.3),
        row("best", 1.0, -0.2),
        row("tied-a", 0.5, 0.1),
        row("worse", 0.5, -0.1),
        row("tied-a", 0.5, 0.1, model="m2"),
    ]

    ranked = [(r["agent__name"], r["model"]) for r in sorted(rows, key=ranking_key)]

    assert ranked == [
        ("best", ""),
        ("better", ""),
        ("tied-a", ""),
        ("tied-a", "m2"),
        ("tied-b", ""),
        ("worse", ""),
        ("unscored", ""),
    ]
