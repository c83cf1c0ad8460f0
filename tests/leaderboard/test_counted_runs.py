"""What the leaderboard counts: trials (benchmark runs started afresh) of the task's current version that ended
finished, failed by the agent or at a limit. An infrastructure failure, a cancelled run, a fork and a validation run
are not counted; ?infra=include counts infrastructure failures (and only them) as failed runs."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.urls import reverse

from leaderboard.query import RankingOptions
from leaderboard.selectors import leaderboard_cells, leaderboard_rows, task_agent_rows
from runner.models import Run
from tests.factories import AgentFactory, RunFactory

ANYONE = AnonymousUser()


@pytest.fixture
def agent(db):
    return AgentFactory(name="solver")


@pytest.fixture
def success(tiny_task, agent):
    """The one run that counts: it succeeded."""
    return RunFactory(task_version=tiny_task, agent=agent, succeeded=True, improvement=0.5, final_score=3.0)


def _extra_run(kind, tiny_task, agent, success):
    """One more run of the same agent on the same task, of the given kind."""
    fields = {
        "infrastructure failure": {"status": Run.Status.FAILED, "failure_kind": Run.FailureKind.INFRASTRUCTURE},
        "cancelled run": {"status": Run.Status.CANCELLED},
        "fork": {"forked_from": success, "fork_step": 0},
        "fork of a deleted run": {"forked_from": None, "fork_step": 3},  # forked_from is SET_NULL on delete
        "fork without its step": {"forked_from": success, "fork_step": None},
        "validation run": {"purpose": Run.Purpose.VALIDATION},
        "live run": {"status": Run.Status.RUNNING},
    }[kind]
    return RunFactory(task_version=tiny_task, agent=agent, succeeded=False, improvement=-0.2, **fields)


NOT_COUNTED = [
    "infrastructure failure",
    "cancelled run",
    "fork",
    "fork of a deleted run",
    "fork without its step",
    "validation run",
    "live run",
]


@pytest.mark.parametrize("kind", NOT_COUNTED)
def test_a_run_that_is_no_trial_of_the_agent_is_not_counted(kind, tiny_task, agent, success):
    _extra_run(kind, tiny_task, agent, success)

    (row,) = leaderboard_rows(viewer=ANYONE)
    (cell,) = leaderboard_cells(viewer=ANYONE)
    (task_row,) = task_agent_rows(viewer=ANYONE, version=tiny_task)

    for figures in (row, cell, task_row):
        assert (figures["runs"], figures["successes"], figures["success_rate"]) == (1, 1, 1.0)
        assert figures["mean_improvement"] == 0.5
        assert figures["infrastructure_failures"] == (1 if kind == "infrastructure failure" else 0)


@pytest.mark.parametrize("kind", NOT_COUNTED)
def test_the_infra_toggle_counts_infrastructure_failures_and_nothing_else(kind, tiny_task, agent, success):
    _extra_run(kind, tiny_task, agent, success)

    (row,) = leaderboard_rows(viewer=ANYONE, options=RankingOptions(include_infrastructure=True))
    (task_row,) = task_agent_rows(viewer=ANYONE, version=tiny_task, options=RankingOptions(include_infrastructure=True))

    expected = (2, 0.5) if kind == "infrastructure failure" else (1, 1.0)
    assert (row["runs"], row["success_rate"]) == expected
    assert (task_row["runs"], task_row["success_rate"]) == expected


@pytest.mark.parametrize(
    "status,failure_kind",
    [
        (Run.Status.FINISHED, ""),
        (Run.Status.FAILED, Run.FailureKind.AGENT),
        (Run.Status.FAILED, Run.FailureKind.LIMIT),
        (Run.Status.TIMED_OUT, Run.FailureKind.LIMIT),
    ],
)
def test_a_run_that_ended_by_the_agent_or_at_a_limit_counts(status, failure_kind, tiny_task, agent, success):
    RunFactory(task_version=tiny_task, agent=agent, status=status, failure_kind=failure_kind, succeeded=False)

    (row,) = leaderboard_rows(viewer=ANYONE)

    assert (row["runs"], row["successes"], row["infrastructure_failures"]) == (2, 1, 0)


def test_a_row_with_only_infrastructure_failures_has_no_rate_and_ranks_last(tiny_task, agent, success):
    unlucky = AgentFactory(name="unlucky")
    RunFactory(task_version=tiny_task, agent=unlucky, status=Run.Status.FAILED, failure_kind="infrastructure")
    RunFactory(task_version=tiny_task, agent=AgentFactory(name="zero"), succeeded=False)

    rows = leaderboard_rows(viewer=ANYONE)

    assert [(r["agent__name"], r["runs"], r["success_rate"]) for r in rows] == [
        ("solver", 1, 1.0),
        ("zero", 1, 0.0),
        ("unlucky", 0, None),
    ]
    assert rows[2]["infrastructure_failures"] == 1 and rows[2]["success_interval"] is None


def test_the_page_shows_the_infra_column_and_its_toggle_changes_the_rate(client, tiny_task, agent, success):
    _extra_run("infrastructure failure", tiny_task, agent, success)
    url = reverse("leaderboard:leaderboard")

    html = client.get(url).content.decode()
    table = html.split('<table class="leaderboard">', 1)[1].split("</table>", 1)[0]
    assert "100.0% [20.7–100.0] n=1" in table and "Infra failures" in table
    assert "not counted are infrastructure failures" in html and '<option value="include">' in html

    included = client.get(url + "?infra=include").content.decode()
    table = included.split('<table class="leaderboard">', 1)[1].split("</table>", 1)[0]
    assert "50.0% [9.5–90.5] n=2" in table
    assert "infrastructure failures counted as failed runs" in included


def test_the_task_page_and_the_api_count_by_the_same_rule(client, tiny_task, agent, success):
    for kind in NOT_COUNTED:
        _extra_run(kind, tiny_task, agent, success)

    page = client.get(reverse("leaderboard:task_detail", args=["tiny"])).content.decode()
    ranking = page.split("<h2>Leaderboard", 1)[1].split("<h2>Files", 1)[0]
    assert "100.0% [20.7–100.0] n=1" in ranking
    assert (
        "50.0% [9.5–90.5] n=2"
        in client.get(reverse("leaderboard:task_detail", args=["tiny"]) + "?infra=include").content.decode()
    )

    (row,) = client.get("/api/v1/leaderboard/").json()
    assert (row["runs"], row["successes"], row["infrastructure_failures"]) == (1, 1, 1)
    assert row["success_interval"] == pytest.approx([0.2065493, 1.0])
    (row,) = client.get("/api/v1/leaderboard/?infra=include").json()
    assert (row["runs"], row["success_rate"]) == (2, 0.5)
