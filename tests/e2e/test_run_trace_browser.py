"""The trace viewer in a real browser: navigation, and live updates through the vendored htmx."""

import pytest
from django.utils import timezone

from runner.execution import run_execute
from runner.models import LLMCall, Run, Step
from runner.selectors import TRACE_PAGE_STEPS
from runner.services import run_create
from tests.factories import RunFactory
from tests.runner.views.test_run_compare import two_runs_create

pytestmark = pytest.mark.e2e


def test_a_researcher_finds_a_run_and_reads_its_steps(page, live_server, tiny_task, baseline_agent):
    run = run_create(task=tiny_task.task, agent=baseline_agent, enqueue=False)
    run_execute(run.pk)

    page.goto(f"{live_server.url}/runs/")
    page.click(f"a[href='/runs/{run.pk}/']")

    page.wait_for_selector("#step-2")
    page.click("#step-1 summary.step-line .index")  # steps are folded to one line; the reader opens one
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


def steps_create(run: Run, indexes: range) -> None:
    now = timezone.now()
    Step.objects.bulk_create(
        Step(run=run, index=i, action="List Files", observation=f"files at step {i}", started_at=now) for i in indexes
    )


def test_earlier_steps_of_a_long_run_load_on_demand(page, live_server, tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, steps_count=120)
    steps_create(run, range(120))
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    assert page.locator("li.step").count() == TRACE_PAGE_STEPS
    assert page.locator(f"#step-{119 - TRACE_PAGE_STEPS}").count() == 0

    page.click("#earlier a")
    page.wait_for_selector(f"#step-{120 - 2 * TRACE_PAGE_STEPS}")
    page.click("#earlier a")
    page.wait_for_selector("#step-0")

    indexes = [int(i.removeprefix("step-")) for i in page.locator("li.step").evaluate_all("els => els.map(e => e.id)")]
    assert indexes == list(range(120))  # in order, each once
    assert page.locator("#earlier").count() == 0  # nothing before step 0


def test_a_live_poll_adds_new_steps_and_keeps_what_the_reader_opened(page, live_server, tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.RUNNING, steps_count=1, live_action="Write File")
    steps_create(run, range(1))
    LLMCall.objects.create(
        run=run,
        step=Step.objects.get(run=run, index=0),
        step_index=0,
        model="test-model",
        messages=[{"role": "user", "content": "which file first?"}],
        completion="train.py",
    )
    page.goto(f"{live_server.url}/runs/{run.pk}/")

    page.click("#step-0 summary.step-line .index")  # the step, folded to one line, opens
    page.click("#step-0 details.llm-calls > summary")
    page.click("#step-0 .calls details:not([open]) > summary")  # the prompt, once the calls have loaded
    page.wait_for_selector("#step-0 .calls >> text=which file first?")
    steps_create(run, range(1, 3))
    Run.objects.filter(pk=run.pk).update(steps_count=3, live_action="Execute Script")

    page.wait_for_selector("#step-2", timeout=8000)
    assert page.locator(".step-live .action").inner_text() == "Execute Script"
    assert page.locator("#step-0 details.step-card[open]").count() == 1  # still open: the card was not re-rendered
    assert page.locator("#step-0 details.llm-calls[open]").count() == 1
    assert page.locator("#step-0 .calls >> text=which file first?").is_visible()  # the prompt, opened, too
    assert [s.get_attribute("id") for s in page.locator("li.step[id]").all()] == ["step-0", "step-1", "step-2"]
    assert page.locator("#jump-links a").all_inner_texts() == ["0", "1", "2"]  # the strip grows with the steps


def test_a_reader_finds_steps_of_a_200_step_run_by_searching_and_the_matches_are_highlighted(
    page, live_server, tiny_task
):
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, steps_count=200)
    steps_create(run, range(200))
    Step.objects.filter(run=run, index=150).update(observation="validation loss went NaN at epoch 7")
    Step.objects.filter(run=run, index=30).update(observation="it WENT NAN once before")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    assert page.locator("#step-30").count() == 0  # not among the last steps shown

    page.fill(".trace-tools input[name=q]", "went nan")
    page.press(".trace-tools input[name=q]", "Enter")

    page.wait_for_selector("#step-150")
    assert page.locator("li.step").evaluate_all("items => items.map(i => i.id)") == ["step-30", "step-150"]
    assert page.locator("#matching").inner_text().startswith("2 of 200 steps match")
    assert page.locator("#step-150 details.step-card[open]").count() == 1  # opened to show what matched
    assert page.locator("#step-150 mark.hit").inner_text() == "went NaN"
    assert page.locator("#step-30 mark.hit").inner_text() == "WENT NAN"


def test_steps_fold_to_one_line_and_open_by_link_keyboard_and_all_at_once(page, live_server, tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, steps_count=120)
    steps_create(run, range(120))

    page.goto(f"{live_server.url}/runs/{run.pk}/#step-12")  # a permalink to a step before the page's first

    page.wait_for_selector("#step-12 details.step-card[open]")
    assert page.locator("details.step-card[open]").count() == 1
    assert page.locator("#step-12 .step-line .input-summary").count() == 0  # List Files here takes no input
    assert not page.locator("#step-13 .observation").is_visible()  # the others stay one line each

    page.keyboard.press("j")
    page.keyboard.press("o")
    assert page.locator("#step-13 details.step-card[open]").count() == 1
    page.keyboard.press("k")
    page.keyboard.press("k")
    page.keyboard.press("o")
    assert page.locator("#step-11 details.step-card[open]").count() == 1

    page.click("button[data-fold=open]")
    assert page.locator("details.step-card:not([open])").count() == 0
    page.click("button[data-fold=close]")
    assert page.locator("details.step-card[open]").count() == 0


def test_a_reader_ticks_two_runs_on_the_list_and_compares_their_final_train_py(page, live_server, tiny_task):
    a, b = two_runs_create(tiny_task)
    page.goto(f"{live_server.url}/runs/")

    page.check(f"input[name=runs][value='{a.pk}']")
    page.check(f"input[name=runs][value='{b.pk}']")
    page.click("#compare-runs button")

    page.wait_for_selector("#file-diff")
    # The list shows the newest first: B's train.py is the first, and A's is diffed against it.
    heads = page.locator("table.compare-head tr:first-child th").all_text_contents()
    assert heads[1:] == [f"run #{b.pk}", f"run #{a.pk}"]
    diff = page.locator(".compare-diff pre.diff").inner_text()
    assert "-lr = 0.1\n-epochs = 9\n+lr = 0.01\n+epochs = 5" in diff
