import pytest

from runner.execution import run_execute
from runner.execution.evaluation import step_score
from runner.models import Step
from runner.services import run_create
from tests.factories import AgentFactory


def act(action: str, **args) -> dict:
    return {"type": "act", "action": action, "input": args}


@pytest.mark.django_db(transaction=True)
def test_intermediate_steps_are_scored_on_their_own_snapshots(tiny_task):
    script = [
        act("Write File", file_name="value.txt", content="1"),
        act("List Files", dir_path="."),
        act("Write File", file_name="value.txt", content="5"),
        act("Final Answer", final_answer="done"),
    ]
    run = run_execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)
    steps = list(Step.objects.filter(run=run))

    assert step_score(step_id=steps[0].pk) == 1.0
    assert step_score(step_id=steps[2].pk) == 5.0

    scores = list(Step.objects.filter(run=run).values_list("score", flat=True))
    assert scores == [1.0, 1.0, 5.0, 5.0]  # steps that changed nothing share their predecessor's snapshot
    assert run.final_score == 5.0


@pytest.mark.django_db(transaction=True)
def test_a_run_that_beat_the_baseline_at_some_step_but_not_at_the_end_is_marked(tiny_task):
    script = [
        act("Write File", file_name="value.txt", content="9"),  # the baseline is 2: far better
        act("Write File", file_name="value.txt", content="1"),  # then worse than the baseline
        act("Final Answer", final_answer="done"),
    ]
    run = run_execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)
    assert run.succeeded is False and run.improved_any_step is None

    steps = list(Step.objects.filter(run=run))
    step_score(step_id=steps[1].pk)
    run.refresh_from_db()
    assert run.improved_any_step is False  # the worse step alone
    step_score(step_id=steps[0].pk)
    run.refresh_from_db()
    assert run.improved_any_step is True
