"""The normalised score of a run on a task with a reference score: 0 at the baseline, 1 at the reference, in the
metric's direction, (score - baseline) / (reference - baseline); its mean per cell and row, shown and exported.
Every figure here is worked out by hand."""

import csv
import io

import pytest
from django.contrib.auth.models import AnonymousUser
from django.urls import reverse

from leaderboard.selectors import leaderboard_matrix, task_agent_rows
from runner.models import Run
from task_bank.models import TaskVersion
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, RunFactory, package_write

ANYONE = AnonymousUser()
URL = reverse("leaderboard:leaderboard")


def _measured(version: TaskVersion, *, baseline: float, reference: float | None) -> TaskVersion:
    TaskVersion.objects.filter(pk=version.pk).update(baseline_score=baseline, reference_score=reference)
    version.refresh_from_db()
    return version


@pytest.fixture
def higher(tiny_task):
    """Higher is better: baseline 2, reference 4."""
    return _measured(tiny_task, baseline=2.0, reference=4.0)


@pytest.fixture
def lower(tmp_path, db):
    """Lower is better: baseline 10, reference 2 (the reference is below the baseline)."""
    files = dict(TINY_FILES, **{"task.toml": TINY_FILES["task.toml"].replace("true", "false")})
    version, _ = task_import(root=package_write(tmp_path / "lower", files), slug="lower")
    assert version.higher_is_better is False
    return _measured(version, baseline=10.0, reference=2.0)


@pytest.fixture
def solver(higher, lower):
    """On "tiny": scores 3 (0.5) and 5 (1.5), and a run that failed unscored (counted, not normalised).
    On "lower": scores 6 ((6 - 10) / (2 - 10) = 0.5) and 11 ((11 - 10) / (2 - 10) = -0.125)."""
    agent = AgentFactory(name="solver")
    for score in (3.0, 5.0):
        RunFactory(task_version=higher, agent=agent, final_score=score, succeeded=score > 2.2)
    RunFactory(task_version=higher, agent=agent, status=Run.Status.FAILED, failure_kind="agent", succeeded=False)
    for score in (6.0, 11.0):
        RunFactory(task_version=lower, agent=agent, final_score=score, succeeded=score < 9.0)
    RunFactory(task_version=higher, agent=agent, final_score=40.0, status=Run.Status.CANCELLED)  # not counted
    return agent


def test_each_cell_normalises_in_its_metrics_direction(solver):
    (line,) = leaderboard_matrix(viewer=ANYONE)["matrix"]
    lower_cell, tiny_cell = line["cells"]

    assert (tiny_cell["mean_normalised"], tiny_cell["normalised_count"]) == (pytest.approx(1.0), 2)  # (0.5 + 1.5) / 2
    assert (lower_cell["mean_normalised"], lower_cell["normalised_count"]) == (pytest.approx(0.1875), 2)
    # the row: (0.5 + 1.5 + 0.5 - 0.125) / 4
    assert (line["row"]["mean_normalised"], line["row"]["normalised_count"]) == (pytest.approx(0.59375), 4)


def test_a_task_without_a_reference_or_with_one_equal_to_its_baseline_has_none(solver, higher, lower):
    _measured(higher, baseline=2.0, reference=None)
    _measured(lower, baseline=10.0, reference=10.0)

    (line,) = leaderboard_matrix(viewer=ANYONE)["matrix"]

    assert line["row"]["mean_normalised"] is None and line["row"]["normalised_count"] == 0
    assert all(cell["mean_normalised"] is None for cell in line["cells"])


def test_a_timed_run_is_normalised_against_the_baseline_measured_alongside_it(lower):
    RunFactory(task_version=lower, agent=AgentFactory(name="timed"), final_score=5.0, paired_baseline=8.0)

    (line,) = leaderboard_matrix(viewer=ANYONE)["matrix"]

    assert line["row"]["mean_normalised"] == pytest.approx(0.5)  # (5 - 8) / (2 - 8)


def test_the_table_shows_the_normalised_score_per_row_and_cell(client, solver):
    html = client.get(URL).content.decode()
    table, by_task = html.split('id="board-table"', 1)[1].split('id="board-by-task"', 1)
    by_task = by_task.split("</table>", 1)[0]

    assert "0.59 n=4" in table  # the row
    assert "norm. 1.00 n=2" in by_task and "norm. 0.19 n=2" in by_task  # the cells, in the table by task


def test_the_task_page_shows_the_normalised_column_only_with_a_reference(client, solver, lower):
    tiny_page = client.get(reverse("leaderboard:task_detail", args=["tiny"])).content.decode()
    assert ">Normalised</th>" in tiny_page and "1.00 n=2" in tiny_page
    rows = task_agent_rows(viewer=ANYONE, version=lower)
    assert rows[0]["mean_normalised"] == pytest.approx(0.1875)

    _measured(lower, baseline=10.0, reference=None)
    assert ">Normalised</th>" not in client.get(reverse("leaderboard:task_detail", args=["lower"])).content.decode()


def test_the_exports_and_the_api_give_the_normalised_score(client, solver):
    (line,) = csv.DictReader(io.StringIO(client.get(URL + "?format=csv").content.decode()))
    data = client.get(URL + "?format=json").json()
    (api,) = client.get(reverse("api-leaderboard")).json()

    assert float(line["mean_normalised"]) == pytest.approx(0.59375) and line["normalised_count"] == "4"
    assert data["rows"][0]["mean_normalised"] == pytest.approx(0.59375)
    cells = {c["task"]: c["mean_normalised"] for c in data["cells"]}
    assert cells == {"tiny": pytest.approx(1.0), "lower": pytest.approx(0.1875)}
    assert api["mean_normalised"] == pytest.approx(0.59375) and api["normalised_count"] == 4


def test_sorting_by_the_normalised_score_puts_rows_without_one_last(client, solver, higher):
    RunFactory(task_version=higher, agent=AgentFactory(name="unscored"), succeeded=False)
    RunFactory(task_version=higher, agent=AgentFactory(name="top"), final_score=4.0, succeeded=True)

    rows = client.get(URL + "?format=json&sort=-mean_normalised").json()["rows"]

    assert [r["agent"] for r in rows] == ["top", "solver", "unscored"]
