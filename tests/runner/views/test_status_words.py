"""Badges and status words that are always true: a success badge only on a trial, "verified" only on a run the
platform executed and evaluated, one rule for where a live run is, and a scored evaluation's output no error."""

import pytest
from django.urls import reverse

from runner.execution import run_execute
from runner.models import Run
from runner.services import run_create
from tests.factories import TINY_FILES, AgentFactory, RunFactory, package_write, validate_now

TRAIN = {"type": "act", "action": "Execute Script", "input": {"script_name": "train.py"}}
FINAL = {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}}


def header(client, run) -> str:
    page = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    return page.split('id="run-header"', 1)[1].split("</section>", 1)[0]


@pytest.mark.django_db
def test_verified_is_said_only_of_runs_executed_and_evaluated_here(client, tiny_task_ready):
    runs = {
        status: RunFactory(task_version=tiny_task_ready, status=status, final_score=None)
        for status in ("finished", "timed_out", "cancelled", "failed", "running")
    }
    scored_failure = RunFactory(task_version=tiny_task_ready, status="failed", final_score=1.0)
    for status, run in runs.items():
        assert ('class="badge verified"' in header(client, run)) == (status in ("finished", "timed_out")), status
    assert 'class="badge verified"' in header(client, scored_failure)


@pytest.mark.django_db
def test_a_validation_run_is_no_success_however_far_it_lands_from_the_baseline(client, tiny_task):
    validate_now(tiny_task)
    round_runs = Run.objects.filter(task_version=tiny_task, purpose=Run.Purpose.VALIDATION)
    assert round_runs.count() == 3 and set(round_runs.values_list("succeeded", flat=True)) == {None}
    trial = RunFactory(task_version=tiny_task, purpose="validation", final_score=9.0, improvement=3.5, succeeded=None)
    words = header(client, trial)
    assert "badge ok" not in words and "a validation run measures the baseline" in words
    benchmark = RunFactory(task_version=tiny_task, final_score=2.0, improvement=0.0, succeeded=False)
    assert "+0.0%: not a success" in header(client, benchmark) or "0.0%: not a success" in header(client, benchmark)
    winner = RunFactory(task_version=tiny_task, final_score=9.0, improvement=3.5, succeeded=True)
    assert "a success" in header(client, winner) and "badge ok" in header(client, winner)


@pytest.mark.django_db
def test_the_live_line_follows_the_status_and_an_ended_stage_leaves_no_words_behind(tiny_task_ready):
    run = RunFactory(task_version=tiny_task_ready, status="evaluating", steps_count=3, live_action="")
    assert run.live_line == {"label": "Evaluating", "text": "scoring the final workspace with the task's hidden eval"}
    run.status = "running"
    assert run.live_line["label"] == "Step 3" and "agent" in run.live_line["text"]
    run.status, run.queue_position = "queued", 2
    assert run.live_line["text"] == "#2 in the queue: waiting for a worker"
    run.status = "finished"
    assert run.live_line == {}


@pytest.mark.django_db(transaction=True)
def test_what_a_scored_evaluation_prints_is_its_output_not_an_error(tmp_path, client, admin_client):
    from task_bank.services import task_import

    files = dict(TINY_FILES)
    files["scripts/eval.py"] = files["scripts/eval.py"].replace(
        "with open", 'print("reading value.txt, 1 of 1")\n            with open'
    )
    version, _ = task_import(root=package_write(tmp_path / "talky", files), slug="talky")
    run = run_create(task=version.task, agent=AgentFactory(config={"script": [TRAIN, FINAL]}), enqueue=False)
    run_execute(run.pk)
    run.refresh_from_db()
    assert run.final_score == 2.0, (run.error, run.eval_error)
    assert run.eval_error == "" and "reading value.txt, 1 of 1" in run.eval_log
    assert "Evaluation output" in admin_client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    page = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    assert "reading value.txt" not in page and 'class="error"' not in page
