"""The leaderboard's and the task page's charts are built from the same runs as their tables: the improvement
distribution holds one point per scored counted run (so its means are the table's), the cost chart's points open
the runs behind their row, and the task's score-over-steps chart draws every counted run's scored steps and final
score (so its best final score is the table's "Best"), and nothing of the runs not counted."""

import json
import re
from decimal import Decimal
from statistics import mean

import pytest
from django.contrib.auth.models import AnonymousUser
from django.urls import reverse

from leaderboard.charts import improvement_distribution_figure, task_scores_figure
from leaderboard.selectors import leaderboard_improvements, leaderboard_matrix, task_agent_rows, task_run_scores
from runner.models import Run
from tests.factories import AgentFactory, RunFactory, StepFactory

ANYONE = AnonymousUser()


def _figure(html: str, name: str) -> dict:
    return json.loads(re.search(rf'<script id="figure-{name}" type="application/json">(.*?)</script>', html, re.S)[1])


@pytest.fixture
def runs(tiny_task):
    """good: improvements 0.1, 0.2, 0.6 (scored), one unscored failure, and a fork, a cancelled run and an
    infrastructure failure (improvement 5, not counted); weak: improvement -0.5."""
    good = AgentFactory(name="good")
    counted = [
        RunFactory(task_version=tiny_task, agent=good, improvement=i, final_score=2.0 + i, succeeded=i > 0.15)
        for i in (0.1, 0.2, 0.6)
    ]
    RunFactory(task_version=tiny_task, agent=good, status=Run.Status.FAILED, failure_kind="agent", succeeded=False)
    RunFactory(task_version=tiny_task, agent=good, improvement=5.0, forked_from=counted[0], fork_step=0)
    RunFactory(task_version=tiny_task, agent=good, improvement=5.0, status=Run.Status.CANCELLED)
    RunFactory(
        task_version=tiny_task, agent=good, improvement=5.0, status=Run.Status.FAILED, failure_kind="infrastructure"
    )
    RunFactory(task_version=tiny_task, agent=AgentFactory(name="weak"), improvement=-0.5, final_score=1.0)
    return counted


def test_the_improvement_distribution_has_one_point_per_scored_counted_run_and_the_tables_means(runs):
    board = leaderboard_matrix(viewer=ANYONE)
    figure = improvement_distribution_figure(leaderboard_improvements(viewer=ANYONE))

    boxes = {t["name"]: t for t in figure["data"]}
    assert set(boxes) == {"good@1", "weak@1"}
    for cell in board["cells"]:
        box = boxes[f"{cell['agent__name']}@1"]
        assert len(box["y"]) == cell["scored"]  # the unscored failure has no point; the fork and cancelled none
        assert mean(box["y"]) == pytest.approx(100 * cell["mean_improvement"])
        assert box["x"] == [cell["task__slug"]] * cell["scored"]
    assert sorted(boxes["good@1"]["y"]) == [10.0, 20.0, 60.0] and boxes["good@1"]["boxpoints"] == "all"


def test_the_leaderboard_page_draws_the_improvement_distribution(client, runs):
    html = client.get(reverse("leaderboard:leaderboard")).content.decode()

    boxes = {t["name"]: t["y"] for t in _figure(html, "improvements")["data"]}
    assert sorted(boxes["good@1"]) == [10.0, 20.0, 60.0] and boxes["weak@1"] == [-50.0]


def test_the_improvement_distribution_follows_the_filters(client, runs):
    html = client.get(reverse("leaderboard:leaderboard") + "?category=research").content.decode()

    assert 'id="figure-improvements"' not in html  # no runs on a research task: no chart


def test_a_cost_chart_point_opens_the_runs_behind_its_row(client, runs, tiny_task):
    RunFactory(task_version=tiny_task, agent=AgentFactory(name="pricey"), cost=Decimal("0.5"))  # costs differ: drawn
    html = client.get(reverse("leaderboard:leaderboard") + "?infra=include").content.decode()
    points = {t["name"]: t for t in _figure(html, "cost-vs-success")["data"] if t["name"] != "Pareto frontier"}

    label, href = points["good@1"]["customdata"][0]
    assert label == "[11.8–76.9%] n=5"  # 2 of 5: the infrastructure failure counts as a failed run here
    assert href.startswith("/runs/?")
    listed = {int(pk) for pk in re.findall(r'href="/runs/(\d+)/"', client.get(href).content.decode())}
    good = Run.objects.filter(agent__name="good", forked_from__isnull=True).exclude(status=Run.Status.CANCELLED)
    assert listed == {r.pk for r in good} and "ranking=with-infrastructure" in href


@pytest.fixture
def stepped(runs):
    """Scored steps: run 0 scores 1.5 then 2.4 at steps 0 and 2 (step 1 unscored); run 1 scores 2.0 at step 0; the
    fork has a scored step too (not counted)."""
    first, second, _ = runs
    for index, score in [(0, 1.5), (1, None), (2, 2.4)]:
        StepFactory(run=first, index=index, score=score)
    StepFactory(run=second, index=0, score=2.0)
    fork = Run.objects.get(forked_from=first)
    StepFactory(run=fork, index=0, score=99.0)
    Run.objects.filter(pk=first.pk).update(steps_count=3)
    return runs


def test_the_task_scores_chart_draws_each_counted_runs_scored_steps_and_final_score(stepped, tiny_task):
    scores = task_run_scores(viewer=ANYONE, version=tiny_task)
    figure = task_scores_figure(**scores, baseline=2.0, reference=None, metric="value")

    lines = [t for t in figure["data"] if t["mode"] == "lines+markers"]
    assert [(t["x"], t["y"]) for t in lines] == [([0, 2], [1.5, 2.4]), ([0], [2.0])]
    assert [t["showlegend"] for t in lines] == [True, False]  # one legend entry per entrant
    finals = {t["name"]: t for t in figure["data"] if t["mode"] == "markers"}
    assert sorted(finals["good@1: final scores"]["y"]) == [2.1, 2.2, 2.6]
    assert finals["good@1: final scores"]["x"][0] == 2  # the first run ended after step index 2
    assert 99.0 not in [y for t in figure["data"] for y in t["y"]]  # the fork is not counted
    best = {r["agent__name"]: r["best"] for r in task_agent_rows(viewer=ANYONE, version=tiny_task)}
    assert max(finals["good@1: final scores"]["y"]) == best["good"] and finals["weak@1: final scores"]["y"] == [1.0]
    assert [s["y0"] for s in figure["layout"]["shapes"]] == [2.0]  # the baseline; no reference line without one


def test_the_task_page_draws_the_scores_chart_only_when_there_are_scores(client, stepped, tiny_task):
    html = client.get(reverse("leaderboard:task_detail", args=["tiny"])).content.decode()

    lines = [t for t in _figure(html, "task-scores")["data"] if t["mode"] == "lines+markers"]
    assert len(lines) == 2 and "plotly-cartesian-3.7.0.min.js" in html
    # The rows and the chart are cached per ranking generation: a run that ends is on the next view.
    RunFactory(task_version=tiny_task, agent=AgentFactory(name="newcomer"), succeeded=True, final_score=3.5)
    again = client.get(reverse("leaderboard:task_detail", args=["tiny"])).content.decode()
    assert "<td>newcomer@1</td>" in again and "newcomer@1: final scores" in again
    Run.objects.all().delete()
    empty = client.get(reverse("leaderboard:task_detail", args=["tiny"])).content.decode()
    assert 'id="figure-task-scores"' not in empty and "plotly" not in empty


def test_the_cost_chart_points_keep_their_label_in_the_hover(tiny_task):
    from leaderboard.charts import cost_vs_success_figure

    RunFactory(task_version=tiny_task, agent=AgentFactory(name="one"), succeeded=True, cost=Decimal("0.01"))
    rows = leaderboard_matrix(viewer=ANYONE)["rows"]

    (point, *_) = cost_vs_success_figure(rows, href=lambda row: f"/runs/?agent={row['agent__name']}")["data"]
    assert point["customdata"] == [["[20.7–100%] n=1", "/runs/?agent=one"]]
    assert "%{customdata[0]}" in point["hovertemplate"]


def test_the_task_pages_queries_do_not_grow_with_its_runs_and_steps(client, tiny_task):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(reverse("leaderboard:task_detail", args=["tiny"])).status_code == 200
        return len(captured)

    agent = AgentFactory(name="many")
    StepFactory(run=RunFactory(task_version=tiny_task, agent=agent, final_score=2.0), index=0, score=2.0)
    few = queries()
    for _ in range(8):
        run = RunFactory(task_version=tiny_task, agent=AgentFactory(), final_score=2.5)
        for index in range(3):
            StepFactory(run=run, index=index, score=2.0 + index)

    assert queries() == few


def test_a_version_string_is_text_in_every_chart_not_plotlys_markup(client, tiny_task):
    """Plotly reads trace names as its own HTML: a version string holding a link drew a link in the legend."""
    version = '<a href="https://x.example">1</a><br>'
    RunFactory(task_version=tiny_task, agent=AgentFactory(name="linker", version=version), improvement=0.2)
    RunFactory(task_version=tiny_task, agent=AgentFactory(name="pricey"), cost=Decimal("0.5"))  # a cost chart too

    html = client.get(reverse("leaderboard:leaderboard")).content.decode()

    names = [
        trace.get("name", "")
        for chart in ("improvements", "cost-vs-success", "success-by-task")
        for trace in _figure(html, chart)["data"]
    ]
    assert any("linker" in name for name in names), names
    assert not any("<a" in name or "<br" in name for name in names), names
    assert any("&lt;a href" in name for name in names), names
