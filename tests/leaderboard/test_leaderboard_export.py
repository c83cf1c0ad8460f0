"""The leaderboard table as CSV (?format=csv) and JSON (?format=json): the rows the page shows, counted by the
same rule, with their intervals, and nothing the viewer may not see."""

import csv
import io
from decimal import Decimal

import pytest
from django.urls import reverse

from runner.models import Run
from tests.factories import AgentFactory, RunFactory

URL = reverse("leaderboard:leaderboard")


@pytest.fixture
def board(tiny_task):
    good = AgentFactory(name="good")
    for succeeded, improvement in [(True, 0.1), (True, 0.2), (False, 0.6)]:
        RunFactory(
            task_version=tiny_task, agent=good, succeeded=succeeded, improvement=improvement, cost=Decimal("0.03")
        )
    RunFactory(task_version=tiny_task, agent=good, status=Run.Status.FAILED, failure_kind="infrastructure")
    RunFactory(task_version=tiny_task, agent=AgentFactory(name="lone"), model="m", succeeded=False)


def _csv(client, query=""):
    response = client.get(URL + "?format=csv" + query)
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_csv_has_one_line_per_row_with_its_counts_rates_and_intervals(client, board):
    good, lone = _csv(client)

    assert (good["agent"], good["agent_version"], good["model"]) == ("good", "1", "")
    assert (good["runs"], good["successes"], good["infrastructure_failures"], good["scored"]) == ("3", "2", "1", "3")
    assert float(good["success_rate"]) == pytest.approx(2 / 3)
    # 2 of 3: Wilson [0.2077, 0.9385]; improvements 0.1, 0.2, 0.6: mean 0.3, sd sqrt(0.14 / 2) = 0.26458,
    # t(2) = 4.302653, half-width 4.302653 * 0.26458 / sqrt(3) = 0.65724
    assert float(good["success_low"]) == pytest.approx(0.20766, abs=1e-5)
    assert float(good["success_high"]) == pytest.approx(0.93851, abs=1e-5)
    assert float(good["mean_improvement"]) == pytest.approx(0.3)
    assert float(good["improvement_low"]) == pytest.approx(0.3 - 0.65724, abs=1e-5)
    assert float(good["improvement_high"]) == pytest.approx(0.3 + 0.65724, abs=1e-5)
    assert float(good["mean_cost"]) == pytest.approx(0.03)
    assert (lone["agent"], lone["model"], lone["runs"], lone["success_rate"]) == ("lone", "m", "1", "0.0")
    assert lone["mean_improvement"] == "" and lone["improvement_low"] == ""  # none, rather than a made-up 0


def test_the_csv_follows_the_infra_toggle(client, board):
    good, _ = _csv(client, "&infra=include")

    assert (good["runs"], good["successes"]) == ("4", "2") and float(good["success_rate"]) == 0.5


def test_the_csv_of_an_empty_leaderboard_is_its_header(client, db):
    response = client.get(URL + "?format=csv")

    assert response.content.decode() == (
        "agent,agent_version,model,tasks,runs,successes,infrastructure_failures,success_rate,success_low,"
        "success_high,any_step_successes,any_step_rate,scored,mean_improvement,improvement_low,improvement_high,normalised_count,mean_normalised,"
        "mean_cost,mean_tokens,mean_seconds,mean_steps,review_tags,reproduction_id,reproduction_verdict,"
        "reproduction_exact,counting\n"
    )


def test_the_json_gives_the_rows_and_cells_and_what_was_counted(client, board):
    data = client.get(URL + "?format=json").json()

    assert data["current_versions_only"] is True and data["infrastructure_failures_counted"] is False
    assert [(r["agent"], r["runs"]) for r in data["rows"]] == [("good", 3), ("lone", 1)]
    assert data["rows"][0]["success_interval"] == pytest.approx([0.20766, 0.93851], abs=1e-5)
    assert {(c["agent"], c["task"], c["runs"]) for c in data["cells"]} == {("good", "tiny", 3), ("lone", "tiny", 1)}


def test_the_exports_hold_a_private_agent_only_for_its_owner_and_staff(viewer, private_run, public_run):
    names = {r["agent"] for r in csv.DictReader(io.StringIO(viewer.client.get(URL + "?format=csv").content.decode()))}
    json_names = {r["agent"] for r in viewer.client.get(URL + "?format=json").json()["rows"]}

    assert ("hidden-hand" in names) == viewer.may_see and "open-book" in names
    assert json_names == names


def test_each_rows_review_tag_counts_are_in_the_csv_the_json_and_the_api(client, board):
    from runner.models import ReviewTag, Step

    runs = list(Run.objects.filter(agent__name="good", status=Run.Status.FINISHED).order_by("pk"))
    for run in runs[:2]:
        ReviewTag.objects.create(run=run, kind=ReviewTag.Kind.HALLUCINATED)
    step = Step.objects.create(run=runs[2], index=0, action="Execute Script", started_at=runs[2].created_at)
    ReviewTag.objects.create(run=runs[2], step=step, kind=ReviewTag.Kind.SCRIPT_CRASHED)
    RunFactory(task_version=runs[0].task_version, agent=runs[0].agent, status=Run.Status.CANCELLED)
    ReviewTag.objects.create(run=Run.objects.get(status=Run.Status.CANCELLED), kind=ReviewTag.Kind.SCRIPT_CRASHED)

    good, lone = _csv(client)
    data = client.get(URL + "?format=json").json()
    api = client.get(reverse("api-leaderboard")).json()

    assert good["review_tags"] == "hallucinated=2 script_crashed=1" and lone["review_tags"] == ""
    assert data["rows"][0]["review_tags"] == {"hallucinated": 2, "script_crashed": 1}  # a cancelled run is not counted
    assert [row["review_tags"] for row in api] == [{"hallucinated": 2, "script_crashed": 1}, {}]
    assert "review_tags" not in data["cells"][0]  # a cell has no tag counts of its own
