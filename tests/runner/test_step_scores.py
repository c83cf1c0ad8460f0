import pytest

from runner.evaluation import step_score
from runner.execution import run_execute
from runner.models import Step
from runner.services import run_create

from ..factories import AgentFactory


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
