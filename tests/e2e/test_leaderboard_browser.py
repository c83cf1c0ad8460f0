"""The leaderboard's charts and the trace's on-demand workspace changes, in a real browser."""

from decimal import Decimal

import pytest

from runner.execution import run_execute
from runner.services import run_create

from ..factories import AgentFactory, RunFactory

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

    page.goto(f"{live_server.url}/leaderboard/")

    page.wait_for_selector("#chart-success-by-task .main-svg")
    page.wait_for_selector("#chart-cost-vs-success .main-svg")
    assert "66.7% [20.8–93.9] n=3" in page.locator("table.leaderboard").inner_text()
    bars = page.locator("#chart-success-by-task .bars path")
    assert bars.count() >= 1


def test_a_steps_workspace_changes_load_when_opened(page, live_server, tiny_task):
    script = [
        {"type": "act", "action": "Write File", "input": {"file_name": "value.txt", "content": "8\n"}},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]
    run = run_execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)

    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.click("#step-0 .workspace summary")

    page.wait_for_selector("#step-0 .file-changes")
    assert "value.txt" in page.locator("#step-0 .file-changes").inner_text()
    assert "+8" in page.locator("#step-0 pre.diff").inner_text()
    page.click("#step-0 .file-changes a")
    page.wait_for_selector(".file-view")
    assert page.locator(".file-view pre").inner_text().strip() == "8"
