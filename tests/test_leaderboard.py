from decimal import Decimal

from django.contrib.auth.models import AnonymousUser
from django.urls import reverse

from leaderboard.charts import cost_vs_success_figure, success_by_task_figure
from leaderboard.query import RankingOptions
from leaderboard.selectors import leaderboard_cells, leaderboard_rows
from runner.models import Run
from tests.factories import AgentFactory, RunFactory

ANYONE = AnonymousUser()


def make_runs(version, agent, outcomes, **extra):
    cost = extra.pop("cost", Decimal("0.01"))
    for succeeded, improvement in outcomes:
        RunFactory(
            task_version=version,
            agent=agent,
            succeeded=succeeded,
            improvement=improvement,
            final_score=1.0,
            cost=cost,
            **extra,
        )


def test_rows_rank_agents_by_success_rate_and_count_only_ended_benchmark_runs(tiny_task):
    good, weak = AgentFactory(name="good"), AgentFactory(name="weak")
    make_runs(tiny_task, good, [(True, 0.3), (True, 0.2), (False, 0.05), (True, 0.4)])
    make_runs(tiny_task, weak, [(False, 0.0), (True, 0.15)])
    RunFactory(task_version=tiny_task, agent=weak, status=Run.Status.CANCELLED, succeeded=False)
    RunFactory(task_version=tiny_task, agent=weak, purpose=Run.Purpose.VALIDATION, succeeded=False)
    RunFactory(task_version=tiny_task, agent=weak, status=Run.Status.RUNNING)

    rows = leaderboard_rows(viewer=ANYONE)

    assert [(r["agent__name"], r["runs"], r["successes"]) for r in rows] == [("good", 4, 3), ("weak", 2, 1)]
    assert rows[0]["success_rate"] == 0.75
    assert abs(rows[0]["mean_improvement"] - 0.2375) < 1e-9
    cells = leaderboard_cells(viewer=ANYONE)
    assert {(c["agent__name"], c["task__slug"], c["runs"]) for c in cells} == {("good", "tiny", 4), ("weak", "tiny", 2)}


def test_the_success_chart_is_a_figure_of_the_cells(tiny_task):
    make_runs(tiny_task, AgentFactory(name="good"), [(True, 0.3), (False, 0.0)])
    figure = success_by_task_figure(leaderboard_cells(viewer=ANYONE))
    assert figure["data"][0]["x"] == ["tiny"] and figure["data"][0]["y"] == [50.0]
    assert figure["data"][0]["name"] == "good@1"
    assert figure["data"][0]["text"] == ["50%"]  # labelled, so 0% is told apart from no runs


def test_the_cost_chart_has_a_named_point_per_entrant_on_a_cost_axis_from_zero(tiny_task):
    make_runs(tiny_task, AgentFactory(name="good"), [(True, 0.3)])
    make_runs(tiny_task, AgentFactory(name="weak"), [(False, 0.0)])
    figure = cost_vs_success_figure(leaderboard_rows(viewer=ANYONE))
    points = [(t["name"], t["y"]) for t in figure["data"] if t["name"] != "Pareto frontier"]
    assert points == [("good@1", [100.0]), ("weak@1", [0.0])]
    low, high = figure["layout"]["xaxis"]["range"]
    assert low < 0 and -low <= 0.1 * high  # the axis starts at zero, with room for the markers


def test_the_leaderboard_page_shows_rows_matrix_and_charts(client, tiny_task, django_assert_max_num_queries):
    make_runs(tiny_task, AgentFactory(name="good"), [(True, 0.3), (True, 0.2)])
    html = client.get(reverse("leaderboard:leaderboard")).content.decode()
    assert 'id="figure-cost-vs-success"' not in html  # one cost: a success-against-cost chart would say nothing
    assert "every entrant's runs cost the same (0.01 per run)" in html
    make_runs(tiny_task, AgentFactory(name="pricey"), [(False, 0.0)], cost=Decimal("0.5"))
    with django_assert_max_num_queries(7):  # generation (table, each figure), 2 figures, tags, reproductions
        html = client.get(reverse("leaderboard:leaderboard")).content.decode()
    assert "good" in html and "100.0% [34.2–100.0] n=2" in html
    assert 'id="figure-success-by-task"' in html and 'id="figure-cost-vs-success"' in html
    assert "plotly-cartesian-3.7.0.min.js" in html


def test_an_entrant_has_one_colour_in_every_chart_whichever_entrants_each_chart_has(tiny_task):
    from leaderboard.charts import PALETTE, entrant_colours, improvement_distribution_figure

    colours = entrant_colours(["a@1", "b@1", "c@1"])
    improvements = [{"agent__name": "c", "agent__version": "1", "model": "", "task__slug": "t", "improvement": 0.1}]
    (box,) = improvement_distribution_figure(improvements, colours=colours)["data"]
    assert box["marker"]["color"] == colours["c@1"] == PALETTE[2]  # not the first colour, its own


def test_rankings_compare_runs_of_the_current_version_unless_all_versions_are_asked_for(client, tiny_task, tmp_path):
    from task_bank.services import task_import
    from tests.factories import TINY_FILES, package_write

    old = tiny_task
    changed = dict(TINY_FILES, **{"env/train.py": 'open("value.txt", "w").write("3.0")\n'})
    new, _ = task_import(root=package_write(tmp_path / "tiny-v2", changed), slug="tiny")
    assert new.pk != old.pk and new.task.current_version_id == new.pk
    make_runs(old, AgentFactory(name="old-only"), [(True, 0.5), (True, 0.5)])
    both = AgentFactory(name="both")
    make_runs(new, both, [(False, 0.0)])
    make_runs(old, both, [(True, 0.9)])

    assert [(r["agent__name"], r["runs"]) for r in leaderboard_rows(viewer=ANYONE)] == [("both", 1)]
    everything = {
        r["agent__name"]: r["runs"] for r in leaderboard_rows(viewer=ANYONE, options=RankingOptions(current_only=False))
    }
    assert everything == {"old-only": 2, "both": 2}

    page = client.get(reverse("leaderboard:leaderboard")).content.decode()
    assert "old-only" not in page and "both" in page
    assert "old-only" in client.get(reverse("leaderboard:leaderboard") + "?versions=all").content.decode()
    task_page = client.get(reverse("leaderboard:task_detail", args=["tiny"])).content.decode()
    ranking, recent = task_page.split("<h2>Leaderboard", 1)[1].split("<h2>Recent runs", 1)
    assert "old-only" not in ranking and "both@" in ranking
    assert "old-only" in recent and "v1</span>" in recent and "v2</span>" in recent  # every run, with its version


def test_the_charts_show_the_tables_rates_and_intervals(client, tiny_task):
    make_runs(tiny_task, AgentFactory(name="good"), [(True, 0.3), (True, 0.2), (False, 0.0)])
    make_runs(tiny_task, AgentFactory(name="none"), [(False, 0.0)] * 10)
    RunFactory(
        task_version=tiny_task, agent=AgentFactory(name="unlucky"), status="failed", failure_kind="infrastructure"
    )
    cells, rows = leaderboard_cells(viewer=ANYONE), leaderboard_rows(viewer=ANYONE)

    bars = {t["name"]: t for t in success_by_task_figure(cells)["data"]}
    # 2 of 3: 66.7% [20.8–93.9]; 0 of 10: 0% [0–27.8] (worked out by hand in tests/leaderboard/test_stats.py)
    assert bars["good@1"]["y"] == [66.7] and bars["none@1"]["y"] == [0.0]
    assert bars["good@1"]["error_y"]["array"] == [27.2] and bars["good@1"]["error_y"]["arrayminus"] == [45.9]
    assert bars["none@1"]["error_y"]["array"] == [27.8] and bars["none@1"]["error_y"]["arrayminus"] == [0.0]
    assert bars["good@1"]["customdata"] == ["[20.8–93.9%] n=3"]
    assert bars["none@1"]["text"] == ["0%"] and bars["none@1"]["textposition"] == ["outside"]  # 0% is labelled
    assert bars["good@1"]["textposition"] == ["inside"]  # in the bar, clear of its error bar
    assert "unlucky@1" not in bars  # no counted run, so no bar

    points = {t["name"]: t for t in cost_vs_success_figure(rows)["data"]}
    # the row with only an infrastructure failure has no rate to plot
    assert set(points) == {"good@1", "none@1", "Pareto frontier"}
    assert points["good@1"]["y"] == [66.7] and points["good@1"]["error_y"]["array"] == [27.2]

    table = client.get(reverse("leaderboard:leaderboard")).content.decode()
    assert "66.7% [20.8–93.9] n=3" in table and "0.0% [0.0–27.8] n=10" in table


def test_the_cost_chart_draws_the_pareto_frontier_of_its_points(tiny_task):
    for name, cost, succeeded in [("cheap", "0.01", False), ("dear", "0.05", True)]:
        RunFactory(task_version=tiny_task, agent=AgentFactory(name=name), succeeded=succeeded, cost=Decimal(cost))
    RunFactory(task_version=tiny_task, agent=AgentFactory(name="worse"), succeeded=False, cost=Decimal("0.03"))

    traces = {t["name"]: t for t in cost_vs_success_figure(leaderboard_rows(viewer=ANYONE))["data"]}

    frontier = traces["Pareto frontier"]
    assert frontier["x"] == [0.01, 0.05] and frontier["y"] == [0.0, 100.0]  # "worse" costs more than "cheap"


def test_labels_of_points_in_one_place_take_different_places_and_the_rest_go_to_the_legend():
    from leaderboard.charts import LABEL_PLACES, label_places

    same = [(0.0, 100.0)] * (len(LABEL_PLACES) + 1)
    assert label_places(same, x_span=1, y_span=123) == [*LABEL_PLACES, None]
    far = [(0.0, 100.0), (0.5, 100.0), (0.0, 50.0)]  # apart on either axis: each the first place
    assert label_places(far, x_span=1, y_span=123) == ["middle right"] * 3


def test_free_agents_at_the_same_rate_get_labels_that_do_not_collide(tiny_task):
    for name in ("baseline", "tuner", "scripted"):  # no LLM: all at cost 0, all at 100%
        RunFactory(task_version=tiny_task, agent=AgentFactory(name=name), succeeded=True, cost=Decimal("0"))

    figure = cost_vs_success_figure(leaderboard_rows(viewer=ANYONE))
    traces = [t for t in figure["data"] if t["name"] != "Pareto frontier"]

    assert [(t["x"], t["y"]) for t in traces] == [([0.0], [100.0])] * 3
    assert len({t["textposition"] for t in traces}) == 3
