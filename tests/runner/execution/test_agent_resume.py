"""A resumed or forked run's agent goes on from its history instead of starting over: the SDK replays the steps
an agent asks for again (their recorded observations, without acting), and an agent that reads its history
itself takes it."""

import io
import json

import pytest

from mlab_agents.sdk import Env
from runner.execution import run_execute
from runner.models import Step
from runner.services import run_create, run_fork
from tests.factories import validate_now

HISTORY = [
    {"step": 0, "action": "List Files", "input": {"dir_path": "."}, "observation": "train.py\n", "error": False},
    {"step": 1, "action": "Invalid Message", "input": {"line": "oops"}, "observation": "ProtocolError", "error": True},
    {"step": 2, "action": "Execute Script", "input": {"script_name": "train.py"}, "observation": "ok", "error": False},
]


def env_with(history: list[dict], answers: list[dict]) -> tuple[Env, io.StringIO]:
    start = {"type": "start", "task": {}, "actions": [], "limits": {}, "config": {}, "history": history}
    lines = [json.dumps(start)] + [json.dumps(answer) for answer in answers]
    written = io.StringIO()
    return Env(reader=io.StringIO("\n".join(lines) + "\n"), writer=written), written


def sent(written: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in written.getvalue().splitlines()]


def test_the_sdk_replays_the_steps_an_agent_takes_again_and_acts_from_where_it_diverges():
    env, written = env_with(HISTORY, [{"type": "observation", "step": 3, "observation": "submitted", "done": True}])
    assert env.steps_taken == 1  # the protocol error is not the agent's to replay

    listing = env.act("List Files", {"dir_path": "."}, Thought="look")
    run = env.act("Execute Script", {"script_name": "train.py"})
    assert (listing.text, listing.step, run.text, env.steps_taken) == ("train.py\n", 0, "ok", 3)
    assert written.getvalue() == ""  # nothing was done again

    final = env.act("Final Answer", {"final_answer": "x"})
    assert final.done and [m["action"] for m in sent(written)] == ["Final Answer"]
    assert env.steps_taken == 4


def test_an_agent_that_goes_another_way_acts_from_then_on():
    answers = [{"type": "observation", "step": 3, "observation": "a"}, {"type": "observation", "step": 4}]
    env, written = env_with(HISTORY, answers)
    env.act("List Files", {"dir_path": "data"})  # differs from step 0
    env.act("Execute Script", {"script_name": "train.py"})  # like step 2, but the agent is past replaying
    assert [m["input"] for m in sent(written)] == [{"dir_path": "data"}, {"script_name": "train.py"}]
    assert env.steps_taken == 5


def test_an_agent_that_takes_its_history_is_not_replayed():
    env, written = env_with(HISTORY, [{"type": "observation", "step": 3, "observation": "again"}])
    assert env.take_history() == HISTORY and env.steps_taken == 3
    assert env.act("List Files", {"dir_path": "."}).text == "again"
    assert len(sent(written)) == 1


@pytest.mark.django_db
def test_a_fork_of_the_baseline_agent_goes_on_from_its_step_instead_of_starting_over(tiny_task, baseline_agent):
    validate_now(tiny_task)
    run = run_execute(run_create(task=tiny_task.task, agent=baseline_agent, enqueue=False).pk)
    assert [s.action for s in run.steps.order_by("index")] == ["List Files", "Execute Script", "Final Answer"]

    fork = run_execute(run_fork(run=run, step_index=1).pk)
    steps = list(Step.objects.filter(run=fork).order_by("index"))
    assert [(s.action, s.inherited) for s in steps] == [
        ("List Files", True),
        ("Execute Script", True),
        ("Final Answer", False),
    ]
    assert fork.status == "finished" and fork.final_score == 2.0
