"""The leaderboard's charts and the trace's on-demand workspace changes, in a real browser."""

from decimal import Decimal

import pytest

from runner.execution import run_execute
from runner.services import run_create
from tests.factories import AgentFactory, RunFactory

pytestmark = pytest.mark.e2e


def test_the_leaderboard_draws_its_charts(page, live_server, tiny_task):
    solver = AgentFactory(name="solver")
    for succeeded in (True, False, True):
        RunFactory(
            task_version=tiny_task,
            agent=solver,
            succeeded=succeeded,
            improvement=0.2,
            final_score=2.4,
            cost=Decimal("0.02"),
        )
    RunFactory(task_version=tiny_task, agent=AgentFactory(name="pricey"), succeeded=False, cost=Decimal("0.5"))

    page.goto(f"{live_server.url}/leaderboard/")

    page.wait_for_selector("#chart-success-by-task .main-svg")
    page.wait_for_selector("#chart-cost-vs-success .main-svg")  # drawn: the two entrants' costs differ
    assert "66.7% [20.8–93.9] n=3" in page.locator("table.leaderboard").inner_text()
    bars = page.locator("#chart-success-by-task .bars path")
    assert bars.count() >= 1


def test_a_steps_workspace_changes_load_when_opened(page, live_server, tiny_task):
    script = [
        {"type": "act", "action": "Write File", "input": {"file_name": "value.txt", "content": "8\n"}},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]
    run = run_execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)

    page.goto(f"{live_server.url}/runs/{run.pk}/#step-0")  # a link to the step opens it
    page.click("#step-0 .workspace summary")

    page.wait_for_selector("#step-0 .file-changes")
    assert "value.txt" in page.locator("#step-0 .file-changes").inner_text()
    assert "+8" in page.locator("#step-0 pre.diff").inner_text()
    page.click("#step-0 .file-changes a")
    page.wait_for_selector(".file-view")
    assert page.locator(".file-view pre").inner_text().strip() == "8"


@pytest.fixture
def three_rows(tiny_task):
    """best: 2 of 2 at 0.09 a run; middle: 1 of 2 at 0.02; cheap: 0 of 3 at 0.001."""
    for name, outcomes, cost in [("best", [True, True], "0.09"), ("middle", [True, False], "0.02")]:
        agent = AgentFactory(name=name)
        for succeeded in outcomes:
            RunFactory(task_version=tiny_task, agent=agent, succeeded=succeeded, improvement=0.2, cost=Decimal(cost))
    cheap = AgentFactory(name="cheap")
    return [
        RunFactory(task_version=tiny_task, agent=cheap, succeeded=False, improvement=0.0, cost=Decimal("0.001"))
        for _ in range(3)
    ]


def _agents(page) -> list[str]:
    rows = page.locator("#board-table table.leaderboard tbody tr td:first-child strong").all_inner_texts()
    by_task = page.locator("#board-by-task tbody tr td:first-child strong").all_inner_texts()
    assert by_task == rows  # the table by task keeps the same order
    return rows


def test_a_header_sorts_the_rows_without_reloading_the_page_and_the_url_keeps_the_order(page, live_server, three_rows):
    page.goto(f"{live_server.url}/leaderboard/")
    page.wait_for_selector("#chart-cost-vs-success .main-svg")
    assert _agents(page) == ["best", "middle", "cheap"]
    page.evaluate("window.notReloaded = true; window.chartBefore = document.getElementById('chart-cost-vs-success')")

    page.click("#board-table th a.sort:text-is('Mean cost')")
    page.wait_for_function("document.querySelector('#board-table tbody td strong').textContent === 'cheap'")

    assert _agents(page) == ["cheap", "middle", "best"]
    assert page.evaluate("window.notReloaded") is True
    assert page.url.endswith("/leaderboard/?sort=mean_cost")
    assert page.evaluate("document.getElementById('chart-cost-vs-success') === window.chartBefore")  # not redrawn

    page.click("#board-table th a.sort:text-is('Mean cost')")  # again: the other direction
    page.wait_for_function("document.querySelector('#board-table tbody td strong').textContent === 'best'")
    assert page.url.endswith("/leaderboard/?sort=-mean_cost") and page.evaluate("window.notReloaded") is True

    page.reload()  # a reload, or the link shared, shows the same order
    assert _agents(page) == ["best", "middle", "cheap"]
    page.goto(f"{live_server.url}/leaderboard/?sort=mean_cost")
    assert _agents(page) == ["cheap", "middle", "best"]


def test_a_click_on_a_cost_chart_point_lands_on_the_filtered_list_of_its_runs(page, live_server, three_rows):
    page.goto(f"{live_server.url}/leaderboard/")
    page.wait_for_selector("#chart-cost-vs-success .main-svg")
    cheap = page.locator("#chart-cost-vs-success .scatterlayer .trace").filter(has_text="cheap@1").locator(".point")

    page.locator("#chart-cost-vs-success").scroll_into_view_if_needed()  # a mouse hovers only what is on screen
    box = cheap.first.bounding_box()  # on the Pareto frontier's line too: the click must still be the point's
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_selector("#chart-cost-vs-success .hoverlayer .hovertext")
    assert "cheap@1" in page.locator("#chart-cost-vs-success .hoverlayer .hovertext").text_content()
    with page.expect_navigation(timeout=10_000):
        page.mouse.down()
        page.mouse.up()

    assert "/runs/?" in page.url and "agent=cheap" in page.url and "ranking=counted" in page.url
    listed = page.locator("table a[href^='/runs/']").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert sorted(int(href.strip("/").split("/")[-1]) for href in listed) == sorted(r.pk for r in three_rows)


def test_a_reviewer_tags_a_step_and_the_leaderboard_counts_it(page, live_server, tiny_task, django_user_model):
    from django.contrib.auth.models import Group
    from django.test import Client

    from runner.models import Step

    agent = AgentFactory(name="dreamer")
    run = RunFactory(task_version=tiny_task, agent=agent, steps_count=2, final_score=1.0)
    for index in range(2):
        Step.objects.create(run=run, index=index, action="Execute Script", started_at=run.created_at)
    reviewer = django_user_model.objects.create_user("reader", password="x")
    reviewer.groups.add(Group.objects.get_or_create(name="reviewer")[0])  # made by a migration; tests flush it
    client = Client()
    client.force_login(reviewer)
    cookie = client.cookies["sessionid"]
    page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
    page.goto(f"{live_server.url}/leaderboard/")
    assert "Hallucinated result" not in page.locator("table").first.inner_text()

    page.goto(f"{live_server.url}/runs/{run.pk}/#step-1")
    page.click("#step-1 details.tag-form > summary")
    page.select_option("#step-1 select[name=kind]", "hallucinated")
    page.fill("#step-1 input[name=comment]", "claims an accuracy the log never shows")
    page.click("#step-1 details.tag-form button[type=submit]")
    page.wait_for_selector("#step-1 li.tag")

    page.goto(f"{live_server.url}/leaderboard/")
    cell = page.locator("td.review-tags", has_text="Hallucinated result 1")
    assert cell.count() == 1
    cell.locator("a").click()
    page.wait_for_selector(f"a[href='/runs/{run.pk}/']")


def test_at_1280_px_the_summary_fits_and_twelve_tasks_sit_in_a_table_of_their_own(page, live_server, tmp_path):
    from task_bank.services import task_import
    from tests.factories import package_write

    slugs = ["ames-house-prices", "clrs-bellman-ford", "digits", "food-reviews", "food-reviews-minilm"]
    slugs += ["kjv-char-lm", "mnist1d", "movielens-genres", "parkinsons-speech", "smollm-inference", "titanic"]
    slugs += ["vectorize-conv"]
    model = "a-provider/a-model-name-that-is-long"
    agents = [AgentFactory(name=name) for name in ("research", "tuner", "baseline-with-a-longer-name")]
    for slug in slugs:
        version, _ = task_import(root=package_write(tmp_path / slug), slug=slug)
        for agent in agents:
            RunFactory(task_version=version, agent=agent, succeeded=True, improvement=0.25,
                       final_score=2.5, cost=Decimal("0.0123"), model=model)  # fmt: skip

    page.goto(f"{live_server.url}/leaderboard/")
    widths = page.evaluate(
        "[...document.querySelectorAll('#board-table .table-scroll')].map(b => [b.scrollWidth, b.clientWidth])"
    )
    (summary, summary_box), by_task = widths
    assert summary <= summary_box, widths  # every summary column in view, none cut off
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    assert page.locator("#board-by-task thead th").count() == 1 + len(slugs)
    # Scrolled sideways, the table by task keeps each row's agent in view.
    page.evaluate("document.querySelectorAll('#board-table .table-scroll')[1].scrollLeft = 10000")
    agent = page.locator("#board-by-task tbody tr td:first-child").first.bounding_box()
    box = page.locator("#board-table .table-scroll").nth(1).bounding_box()
    assert agent["x"] >= box["x"] - 1
