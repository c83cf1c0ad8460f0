"""The trace viewer in a real browser: navigation, and live updates through the vendored htmx."""

import pytest
from django.utils import timezone

from runner.execution import run_execute
from runner.models import Run, Step
from runner.services import run_create

from ..factories import RunFactory

pytestmark = pytest.mark.e2e


def test_a_researcher_finds_a_run_and_reads_its_steps(page, live_server, tiny_task, baseline_agent):
    run = run_create(task=tiny_task.task, agent=baseline_agent, enqueue=False)
    run_execute(run.pk)

    page.goto(f"{live_server.url}/runs/")
    page.click(f"a[href='/runs/{run.pk}/']")

    page.wait_for_selector("#step-2")
    actions = page.locator(".step .action").all_inner_texts()
    assert actions == ["List Files", "Execute Script", "Final Answer"]
    assert "training" in page.locator("#step-1 .observation").inner_text()
    assert page.locator("#final-score").inner_text() == "2.0000"


def test_a_live_run_updates_without_a_reload(page, live_server, tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.RUNNING, live_action="Execute Script")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    assert page.locator(".step-live .action").inner_text() == "Execute Script"

    Step.objects.create(
        run=run, index=0, action="Execute Script", observation="epoch 1 done", started_at=timezone.now()
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED, steps_count=1, final_score=1.5, live_action="")

    page.wait_for_selector("#step-0", timeout=8000)
    assert page.locator("#final-score").inner_text() == "1.5000"
    assert page.locator(".step-live").count() == 0
    assert page.locator("#poller[hx-trigger]").count() == 0  # polling stops once the run has ended
