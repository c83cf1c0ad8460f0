"""The verdict rule of a reproduction (docs/reproductions.md), on counts worked out by hand."""

from leaderboard.stats import DIFFERS, HOLDS, TOO_FEW, reproduction_verdict


def test_the_same_rate_on_every_task_holds():
    judged = reproduction_verdict({"a": (2, 4, 2, 4), "b": (0, 2, 0, 2)})

    assert judged["verdict"] == HOLDS
    assert judged["result"]["difference"] == 0
    assert judged["tasks"]["a"]["verdict"] == judged["tasks"]["b"]["verdict"] == HOLDS


def test_a_difference_whose_interval_excludes_zero_differs():
    judged = reproduction_verdict({"a": (4, 4, 0, 4)})

    assert judged["verdict"] == DIFFERS
    assert 0 < judged["result"]["interval"][0] < judged["result"]["interval"][1] <= 1


def test_one_task_that_differs_makes_the_row_differ_though_the_mean_difference_is_zero():
    judged = reproduction_verdict({"a": (4, 4, 0, 4), "b": (0, 4, 4, 4)})

    assert (
        judged["result"]["difference"] == 0 and judged["result"]["interval"][0] <= 0 <= judged["result"]["interval"][1]
    )
    assert judged["verdict"] == DIFFERS
    assert judged["tasks"]["a"]["verdict"] == judged["tasks"]["b"]["verdict"] == DIFFERS


def test_fewer_than_two_runs_on_a_side_of_any_task_is_too_few_to_say():
    judged = reproduction_verdict({"a": (4, 4, 0, 4), "b": (1, 1, 0, 2)})

    assert judged["verdict"] == TOO_FEW
    assert judged["tasks"]["a"]["verdict"] == DIFFERS and judged["tasks"]["b"]["verdict"] == TOO_FEW
    assert judged["needs"] == "at least 2 counted runs on both sides of every task (b: 1 more reproduction run)"
    assert reproduction_verdict({"a": (0, 2, 0, 1)})["verdict"] == TOO_FEW


def test_a_reproduction_that_matches_exactly_holds_once_each_side_has_two_runs():
    assert reproduction_verdict({"a": (2, 2, 2, 2), "b": (0, 2, 0, 2)})["verdict"] == HOLDS
    few = reproduction_verdict({"a": (1, 1, 1, 1)})
    assert few["verdict"] == TOO_FEW
    assert few["needs"] == (
        "at least 2 counted runs on both sides of every task (a: 1 more reproduction run; a: 1 more original run)"
    )


def test_a_task_the_reproduction_has_no_counted_run_on_is_too_few_to_say():
    judged = reproduction_verdict({"a": (2, 2, 2, 2), "b": (0, 0, 1, 2)})

    assert judged["verdict"] == TOO_FEW
    assert judged["result"]["tasks"] == 1  # the difference over the tasks both sides ran
    assert reproduction_verdict({})["verdict"] == TOO_FEW
