"""The leaderboard's statistics, checked against figures worked out by hand."""

from decimal import Decimal

import pytest

from leaderboard import stats
from leaderboard.stats import (
    entrant_stats,
    mean,
    mean_interval,
    mean_label,
    paired_difference,
    pareto_frontier,
    ranking_key,
    rate_label,
    success_rate,
    t_quantile95,
    wilson_interval,
)


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


Z2 = 1.959963984540054**2  # z squared, for the hand-worked intervals below


def test_the_wilson_interval_at_none_of_n_runs_from_zero_to_z2_over_n_plus_z2():
    assert wilson_interval(successes=0, runs=1) == (0.0, pytest.approx(Z2 / (1 + Z2)))  # 0.7935
    assert wilson_interval(successes=0, runs=10) == (0.0, pytest.approx(Z2 / (10 + Z2)))  # 0.2775
    assert wilson_interval(successes=0, runs=10)[1] == pytest.approx(0.27753, abs=1e-5)


def test_the_wilson_interval_at_all_of_n_runs_reaches_one_from_n_over_n_plus_z2():
    assert wilson_interval(successes=1, runs=1) == (pytest.approx(1 / (1 + Z2)), 1.0)  # 0.2065
    assert wilson_interval(successes=10, runs=10) == (pytest.approx(10 / (10 + Z2)), 1.0)  # 0.7225


def test_the_wilson_interval_in_between():
    # 3 of 8: centre (0.375 + z²/16) / (1 + z²/8) = 0.41555, half-width z·sqrt(0.375·0.625/8 + z²/256) / (1 + z²/8)
    # = 0.27871: [0.1368, 0.6943].
    low, high = wilson_interval(successes=3, runs=8)
    assert (low, high) == (pytest.approx(0.136844, abs=1e-6), pytest.approx(0.694258, abs=1e-6))
    low, high = wilson_interval(successes=5, runs=10)  # symmetric about one half
    assert low == pytest.approx(1 - high) and low == pytest.approx(0.236593, abs=1e-6)


def test_there_is_no_wilson_interval_without_runs():
    assert wilson_interval(successes=0, runs=0) is None


def test_a_rate_reads_with_its_interval_and_n():
    assert rate_label(successes=3, runs=8) == "37.5% [13.7–69.4] n=8"
    assert rate_label(successes=0, runs=10) == "0.0% [0.0–27.8] n=10"
    assert rate_label(successes=1, runs=1) == "100.0% [20.7–100.0] n=1"
    assert rate_label(successes=0, runs=0) == "— n=0"


@pytest.mark.parametrize(
    "df,t", [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (29, 2.0452), (100, 1.9840), (1000, 1.9623)]
)
def test_the_t_quantile_matches_the_printed_tables(df, t):
    assert t_quantile95(df) == pytest.approx(t, abs=1e-4)


@pytest.mark.parametrize("df", [200, 999, 5000])
def test_past_many_degrees_of_freedom_the_t_quantile_is_the_exact_one_found_quickly(df, monkeypatch):
    quick = t_quantile95(df)
    monkeypatch.setattr(stats, "T_EXPANSION_FROM", 10**9)  # bisection on the exact distribution
    t_quantile95.cache_clear()
    try:
        assert quick == pytest.approx(t_quantile95(df), abs=1e-9)
    finally:
        t_quantile95.cache_clear()


def test_the_mean_interval_is_mean_plus_minus_t_times_the_standard_error():
    # improvements 0.1, 0.2, 0.3, 0.6: mean 0.3, sample sd sqrt(0.14 / 3) = 0.21602, t(3) = 3.18245,
    # half-width 3.18245 * 0.21602 / 2 = 0.34374.
    low, high = mean_interval(mean=0.3, sd=(0.14 / 3) ** 0.5, count=4)
    assert (low, high) == (pytest.approx(0.3 - 0.34374, abs=1e-5), pytest.approx(0.3 + 0.34374, abs=1e-5))


def test_there_is_no_mean_interval_below_two_values():
    assert mean_interval(mean=0.5, sd=None, count=1) is None
    assert mean_interval(mean=None, sd=None, count=0) is None


def test_a_mean_reads_with_its_interval_and_n():
    assert mean_label(mean=0.3, interval=(-0.04374, 0.64374), count=4) == "30.0% [-4.4, 64.4] n=4"
    assert mean_label(mean=0.5, interval=None, count=1) == "50.0% n=1"
    assert mean_label(mean=None, interval=None, count=0) == "—"


def test_the_pareto_frontier_keeps_the_points_nothing_beats_on_both_cost_and_success():
    points = [(0.0, 10.0), (0.5, 35.0), (0.5, 40.0), (0.4, 30.0), (0.6, 35.0), (1.0, 40.0), (2.0, 90.0)]

    # (0.6, 35) loses to (0.5, 40); (0.5, 35) to (0.5, 40); (1.0, 40) to (0.5, 40), which is as good for less.
    assert pareto_frontier(points) == [(0.0, 10.0), (0.4, 30.0), (0.5, 40.0), (2.0, 90.0)]
    assert pareto_frontier([]) == []
    assert pareto_frontier([(0.3, 0.0)]) == [(0.3, 0.0)]


def test_the_paired_difference_averages_the_per_task_differences_each_task_weighing_the_same():
    # task 1: 3/3 against 0/3, a difference of 1; task 2: 0/1 against 0/9, none. The mean is 0.5 (pooling the
    # runs would say 3/4 - 0/12 = 0.75, letting the task with more runs of B weigh more).
    assert paired_difference([(3, 3, 0, 3), (0, 1, 0, 9)])["difference"] == 0.5


def test_the_interval_of_one_task_holds_the_estimate_and_what_two_runs_a_side_allow():
    # A 1 of 2, B 0 of 2: the difference is 0.5, and two runs a side cannot tell it from none.
    result = paired_difference([(1, 2, 0, 2)])
    low, high = result["interval"]
    assert (result["difference"], result["tasks"]) == (0.5, 1) and -1 <= low < 0 < 0.5 < high <= 1


def test_a_side_that_always_or_never_succeeded_in_a_few_runs_is_still_uncertain():
    # A deterministic agent's 2 of 2 against 0 of 2, and 0 of 2 on both sides of another task: +50 points, and not
    # [+50, +50] (a bootstrap of the runs themselves could not move them).
    low, high = paired_difference([(2, 2, 0, 2), (0, 2, 0, 2)])["interval"]
    assert low < 0.5 < high and high - low > 0.3
    low, high = paired_difference([(3, 3, 0, 3), (2, 2, 0, 4)])["interval"]
    assert 0 < low < 0.9 and high <= 1  # different, but not surely by all of it


def test_the_interval_is_seeded_and_narrows_with_more_runs():
    few = paired_difference([(3, 8, 1, 8), (5, 10, 5, 10)])
    assert paired_difference([(3, 8, 1, 8), (5, 10, 5, 10)]) == few  # the same page, the same interval
    many = paired_difference([(30, 80, 10, 80), (50, 100, 50, 100)])
    assert few["interval"][0] < 0 < few["interval"][1]  # 3 of 8 against 1 of 8 could be chance
    assert 0 < many["interval"][0] < many["difference"] == 0.125 < many["interval"][1]  # ten times as many: not


def test_one_run_on_a_task_gives_a_difference_but_no_interval():
    result = paired_difference([(1, 1, 0, 2), (2, 3, 1, 3)])  # A ran once on the first task
    assert (result["difference"], result["interval"], result["fewest_runs"]) == (pytest.approx(2 / 3), None, 1)
    assert paired_difference([(1, 2, 0, 2), (2, 3, 1, 3)])["interval"] is not None


def test_there_is_no_paired_difference_without_a_shared_task():
    assert paired_difference([]) is None
