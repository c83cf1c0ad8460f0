"""The leaderboard reads its table with one aggregation query whatever the number of runs, rows or tasks: the rows
are added up from the per-task cells, so they agree with them; with many scored runs, the improvement chart draws
each cell's box from the database's quartiles instead of every run as a point."""

import json
import re

import pytest
from django.contrib.auth.models import AnonymousUser
from django.urls import reverse

from leaderboard import views
from leaderboard.selectors import leaderboard_matrix
from runner.models import Run
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, RunFactory, package_write

ANYONE = AnonymousUser()


@pytest.fixture
def board(tiny_task, tmp_path):
    """good: improvements 0.1, 0.2, 0.6 on tiny (two succeeded) and 0.3 on other; broken: only an infrastructure
    failure; plus rows enough to show that the number of queries does not grow with them."""
    other, _ = task_import(root=package_write(tmp_path / "other", TINY_FILES), slug="other")
    good = AgentFactory(name="good")
    for improvement in (0.1, 0.2, 0.6):
        RunFactory(task_version=tiny_task, agent=good, improvement=improvement, succeeded=improvement > 0.15)
    RunFactory(task_version=other, agent=good, improvement=0.3, succeeded=True)
    broken = AgentFactory(name="broken")
    RunFactory(task_version=tiny_task, agent=broken, status=Run.Status.FAILED, failure_kind="infrastructure")
    for n in range(6):
        RunFactory(task_version=(tiny_task, other)[n % 2], agent=AgentFactory(), improvement=0.0, succeeded=False)
    return tiny_task


def _figure(html: str, name: str) -> dict:
    return json.loads(re.search(rf'<script id="figure-{name}" type="application/json">(.*?)</script>', html, re.S)[1])


def test_the_leaderboard_page_reads_its_table_and_charts_in_two_queries(client, board, django_assert_max_num_queries):
    # The ranking generation (for the rendered table and for each figure), then, the first time for that
    # generation, each figure's one query of the runs: the table's groups and its review tag counts, the
    # improvement chart's points.
    with django_assert_max_num_queries(7):  # and the rows' latest reproductions
        html = client.get(reverse("leaderboard:leaderboard")).content.decode()
    assert "good@1" in html
    with django_assert_max_num_queries(3):  # the same generation: nothing of the runs is read again
        assert "good@1" in client.get(reverse("leaderboard:leaderboard")).content.decode()
    with django_assert_max_num_queries(2):  # a new order: the table alone, from the cached groups
        client.get(reverse("leaderboard:leaderboard") + "?sort=runs", HTTP_HX_REQUEST="true")


def test_each_row_adds_up_its_cells_and_a_row_of_infrastructure_failures_only_has_no_cell(board):
    matrix = leaderboard_matrix(viewer=ANYONE)

    rows = {row["agent__name"]: row for row in matrix["rows"]}
    good = rows["good"]
    assert (good["runs"], good["successes"], good["tasks"], good["scored"]) == (4, 3, 2, 4)
    assert good["mean_improvement"] == pytest.approx(0.3)
    # the sample sd of 0.1, 0.2, 0.6, 0.3 is 0.216025; t(3) = 3.182446; half-width 3.182446 * 0.216025 / 2
    assert good["improvement_interval"] == (pytest.approx(0.3 - 0.343744, abs=1e-6), pytest.approx(0.643744))
    for line in matrix["matrix"]:
        present = [cell for cell in line["cells"] if cell]
        assert line["row"]["runs"] == sum(cell["runs"] for cell in present)
        assert line["row"]["tasks"] == len(present)
    broken = rows["broken"]
    assert (broken["runs"], broken["infrastructure_failures"], broken["tasks"]) == (0, 1, 0)
    assert broken["success_rate"] is None
    assert not [c for c in matrix["cells"] if c["agent__name"] == "broken"]


def test_with_many_scored_runs_the_improvement_chart_draws_boxes_from_the_quartiles(client, board, monkeypatch):
    monkeypatch.setattr(views, "IMPROVEMENT_POINTS_MAX", 3)  # 10 scored runs: past it

    html = client.get(reverse("leaderboard:leaderboard")).content.decode()

    good = next(t for t in _figure(html, "improvements")["data"] if t["name"] == "good@1")
    assert "y" not in good and good["x"] == ["other", "tiny"]
    # tiny: 10, 20, 60 (%): quartiles by linear interpolation 15, 20, 40; other: one run of 30
    assert (good["q1"], good["median"], good["q3"]) == ([30.0, 15.0], [30.0, 20.0], [30.0, 40.0])
    assert (good["lowerfence"], good["upperfence"], good["text"]) == ([30.0, 10.0], [30.0, 60.0], ["n=1", "n=3"])
    assert good["mean"] == [30.0, 30.0]
