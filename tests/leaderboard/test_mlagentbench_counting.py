"""MLAgentBench's counting as a leaderboard view (?counting=mlagentbench) beside the platform's: runs that ended in an
error of theirs (the time limit, a budget, an agent that crashed) and infrastructure failures are left out, and a
final score counts only when it is above 0; the page, the API and the exports say which counting they follow."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.utils.timezone import now

from leaderboard.query import RankingOptions
from leaderboard.selectors import leaderboard_rows, task_agent_rows
from runner.models import Run, Step
from tests.factories import AgentFactory, RunFactory

ANYONE = AnonymousUser()
MLAGENTBENCH = RankingOptions(counting="mlagentbench")
FAILED, LIMIT, AGENT = Run.Status.FAILED, Run.FailureKind.LIMIT, Run.FailureKind.AGENT

#: (how the run ended, its final score, improvement and success; whether MLAgentBench's tables count it)
RUNS = [
    ({"status": "finished"}, 3.0, 0.5, True, True),
    ({"status": "timed_out", "failure_kind": LIMIT, "error": "reached the time limit of 60 s"}, 3.0, 0.5, True, False),
    # Out of time inside Execute Script: there the action's error, then a normal end, scored and counted.
    ({"status": "timed_out", "failure_kind": LIMIT, "error": "reached the time limit of 60 s while a script ran"},
     2.5, 0.25, True, True),
    ({"status": FAILED, "failure_kind": LIMIT, "error": "reached the step limit of 50 steps"}, 1.0, -0.5, False, True),
    ({"status": FAILED, "failure_kind": AGENT, "error": "the agent process exited (code 1) without a Final Answer"},
     None, None, False, False),
    ({"status": FAILED, "failure_kind": AGENT, "error": "the agent process exited (code 0) without a Final Answer"},
     None, None, False, True),
    ({"status": "finished"}, -1.0, -1.5, False, True),  # a score of 0 or less is no score to MLAgentBench
    ({"status": FAILED, "failure_kind": LIMIT, "error": "the run's token budget of 100 would be exceeded"},
     2.5, 0.25, True, False),
    ({"status": FAILED, "failure_kind": Run.FailureKind.INFRASTRUCTURE, "error": "the worker stopped"},
     None, None, False, False),
]  # fmt: skip


@pytest.fixture
def runs(tiny_task_ready):
    agent = AgentFactory(name="solver")
    for ended, score, improvement, succeeded, _ in RUNS:
        RunFactory(
            task_version=tiny_task_ready, agent=agent, final_score=score, improvement=improvement,
            succeeded=succeeded, **ended,
        )  # fmt: skip
    return tiny_task_ready


def test_mlagentbench_counting_leaves_out_runs_that_ended_in_their_error_and_scores_not_above_zero(runs):
    (ours,) = leaderboard_rows(viewer=ANYONE)
    (theirs,) = leaderboard_rows(viewer=ANYONE, options=MLAGENTBENCH)

    assert (ours["runs"], ours["successes"], ours["scored"]) == (8, 4, 6)
    assert ours["mean_improvement"] == pytest.approx((0.5 + 0.5 + 0.25 - 0.5 - 1.5 + 0.25) / 6)
    assert theirs["runs"] == sum(counted for *_, counted in RUNS) == 5
    assert (theirs["successes"], theirs["scored"]) == (2, 3)  # finished 3.0, out of time in a script 2.5, steps 1.0
    assert theirs["mean_improvement"] == pytest.approx((0.5 + 0.25 - 0.5) / 3)
    (task_row,) = task_agent_rows(viewer=ANYONE, version=runs, options=MLAGENTBENCH)
    assert (task_row["runs"], task_row["best"]) == (5, 3.0)


def test_the_page_the_api_and_the_exports_say_which_counting_they_follow(runs, client):
    page = client.get("/leaderboard/?counting=mlagentbench").content.decode()
    assert "<strong>Counting: MLAgentBench's.</strong>" in page
    assert '<option value="">this platform\'s</option>' in page  # the one place to change it
    assert "<strong>Counting: this platform's.</strong>" in client.get("/leaderboard/").content.decode()

    exported = client.get("/leaderboard/?counting=mlagentbench&format=json").json()
    assert (exported["counting"], exported["counting_name"]) == ("mlagentbench", "MLAgentBench's counting")
    assert exported["rows"][0]["runs"] == 5
    csv = client.get("/leaderboard/?counting=mlagentbench&format=csv").content.decode().splitlines()
    assert csv[0].endswith(",counting") and csv[1].endswith(",mlagentbench")
    assert client.get("/api/v1/leaderboard/?counting=mlagentbench").json()[0]["runs"] == 5
    refused = client.get("/api/v1/leaderboard/?counting=paper")
    assert refused.status_code == 400 and "counting" in refused.json()
    assert client.get("/api/v1/leaderboard/?sort=").status_code == 400  # its schema asks for a column


def scored_step(run: Run, score: float) -> None:
    Step.objects.create(run=run, index=run.steps.count(), action="Execute Script", score=score, started_at=now())


def test_mlagentbench_counting_shows_success_at_any_step_as_plot_py_reports_it(runs, client):
    """plot.py's best score above 0 over the scored steps and the final score it keeps, against its baseline."""
    step_limit = Run.objects.get(error__startswith="reached the step limit")  # final 1.0: -50 %
    scored_step(step_limit, 2.3)  # +15 % at some step: a success at any point
    scored_step(Run.objects.get(final_score=-1.0), 2.1)  # +5 %: not
    scored_step(Run.objects.get(error__endswith="(code 1) without a Final Answer"), 3.0)  # not counted at all
    Run.objects.update(improved_any_step=None)  # the platform's own flag plays no part in this counting
    (theirs,) = leaderboard_rows(viewer=ANYONE, options=MLAGENTBENCH)
    assert (theirs["successes"], theirs["any_step_successes"], theirs["runs"]) == (2, 3, 5)
    assert theirs["any_step_rate"] == pytest.approx(0.6)

    page = client.get("/leaderboard/?counting=mlagentbench").content.decode()
    assert "Success at any step</th>" in page and "60.0%" in page
    assert "Success at any step" not in client.get("/leaderboard/").content.decode()
    assert client.get("/api/v1/leaderboard/?counting=mlagentbench").json()[0]["any_step_rate"] == pytest.approx(0.6)


def test_the_gpt4_rule_keeps_the_runs_that_ended_in_an_error_as_not_succeeded_and_unscored(runs, client):
    (gpt4,) = leaderboard_rows(viewer=ANYONE, options=RankingOptions(counting="mlagentbench-gpt4"))
    assert gpt4["runs"] == len(RUNS) == 9
    # Only the runs its other tables count keep their scores above 0: the budget's 2.5 and the time-out's 3.0 do not.
    assert (gpt4["successes"], gpt4["scored"]) == (2, 3)
    assert gpt4["mean_improvement"] == pytest.approx((0.5 + 0.25 - 0.5) / 3)
    page = client.get("/leaderboard/?counting=mlagentbench-gpt4").content.decode()
    assert "<strong>Counting: MLAgentBench's, as for its GPT-4 runs.</strong>" in page
    assert client.get("/api/v1/leaderboard/?counting=mlagentbench-gpt4").json()[0]["runs"] == 9


def baseline_agent_runs(version, *scores):
    baseline = AgentFactory(name="baseline", kind="builtin")
    for score in scores:
        RunFactory(task_version=version, agent=baseline, final_score=score, improvement=0.0, succeeded=False)


def test_the_baseline_is_plot_pys_the_mean_of_the_baseline_agents_scores_above_zero(runs):
    baseline_agent_runs(runs, 2.5, 3.5, -1.0)  # plot.py: 3.0; the validated baseline stays 2.0
    solver = next(r for r in leaderboard_rows(viewer=ANYONE, options=MLAGENTBENCH) if r["agent__name"] == "solver")
    # finished 3.0: 0; out of time in a script 2.5: -1/6; step limit 1.0: -2/3. None beats 3.0 by 10 %.
    assert (solver["successes"], solver["scored"]) == (0, 3)
    assert solver["mean_improvement"] == pytest.approx((0 - 1 / 6 - 2 / 3) / 3)
    (ours,) = [r for r in leaderboard_rows(viewer=ANYONE) if r["agent__name"] == "solver"]
    assert ours["successes"] == 4  # this platform's counting keeps the validated baseline


def test_where_baseline_runs_exist_and_none_scored_the_baseline_is_nan_and_nothing_improves(runs):
    baseline_agent_runs(runs, -1.0, None)
    solver = next(r for r in leaderboard_rows(viewer=ANYONE, options=MLAGENTBENCH) if r["agent__name"] == "solver")
    assert (solver["runs"], solver["successes"], solver["scored"], solver["mean_improvement"]) == (5, 0, 0, None)


def test_a_baseline_declared_for_always_is_plot_pys_whatever_the_baseline_agent_scored(runs):
    runs.manifest = {**runs.manifest, "baseline": {"score": 1.0, "reason": "fixed", "when": "always"}}
    runs.save(update_fields=["manifest"])
    baseline_agent_runs(runs, 2.5, 3.5)
    solver = next(r for r in leaderboard_rows(viewer=ANYONE, options=MLAGENTBENCH) if r["agent__name"] == "solver")
    assert (solver["successes"], solver["scored"]) == (2, 3)  # 3.0 and 2.5 beat 1.0; 1.0 does not
    assert solver["mean_improvement"] == pytest.approx((2.0 + 1.5 + 0.0) / 3)
