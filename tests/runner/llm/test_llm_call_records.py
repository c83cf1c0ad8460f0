"""A run's model call is written as soon as it is answered: its row, its tokens and cost counted to the run, its
budget reservation and its endpoint slot given back. The step the agent takes next counts it."""

from decimal import Decimal

import pytest

from runner.execution import run_execute
from runner.llm.gateway import complete
from runner.models import LLMCall, Run
from runner.services import run_create
from tests.factories import AgentFactory, RunFactory
from tests.runner.llm.test_llm_gateway import slots_held

MESSAGES = [{"role": "user", "content": "what next?"}]
USAGE = {"prompt_tokens": 900, "completion_tokens": 40}


@pytest.fixture
def run(tiny_task, endpoint):
    return RunFactory(task_version=tiny_task, agent=AgentFactory(), status=Run.Status.RUNNING, model="test-model")


def test_an_answered_call_is_written_counted_and_gives_back_its_slot_and_reservation(run, llm_server):
    Run.objects.filter(pk=run.pk).update(max_tokens=100_000)
    run.refresh_from_db()
    llm_server.script = [{"content": "List the files.", "usage": USAGE}]

    complete(run=run, messages=MESSAGES, step_index=0)

    run.refresh_from_db()
    call = LLMCall.objects.get(run=run)
    assert (call.completion, call.step_index, call.tokens_in, call.cost) == (
        "List the files.",
        0,
        900,
        Decimal("0.00098"),
    )
    assert (run.tokens_in, run.tokens_out, run.tokens_reserved, run.cost_reserved) == (900, 40, 0, 0)
    assert slots_held() == []


def test_the_next_call_finds_the_answer_of_the_one_before_it(run, llm_server):
    """An agent asking again in a step: the later call's note on a repeated answer names the earlier call."""
    llm_server.default = "the same answer"

    complete(run=run, messages=MESSAGES, step_index=1, options={"temperature": 0.5})
    complete(run=run, messages=MESSAGES, step_index=1, options={"temperature": 0.5})

    first, again = LLMCall.objects.filter(run=run).order_by("pk")
    assert f"the same answer as the same request got (call {first.pk})" in again.error


@pytest.mark.django_db(transaction=True)
def test_a_call_whose_agent_ends_without_acting_is_written_and_counted(tiny_task, endpoint, llm_server):
    llm_server.script = [{"content": "I give up", "usage": USAGE}]
    script = [{"type": "llm", "messages": MESSAGES}, {"exit": 3}]
    run = run_create(
        task=tiny_task.task, agent=AgentFactory(config={"script": script}), model="test-model", enqueue=False
    )

    run = run_execute(run.pk)

    assert run.status == "failed" and run.failure_kind == "agent"
    assert LLMCall.objects.get(run=run).completion == "I give up"
    assert (run.tokens_in, run.tokens_out, slots_held()) == (900, 40, [])


@pytest.mark.django_db(transaction=True)
def test_each_step_counts_the_calls_made_before_it(tiny_task, endpoint, llm_server):
    """The research agent's step: a call, then the action it chose. The step records the call's tokens."""
    llm_server.script = [{"content": "list them", "usage": USAGE}, {"content": "done", "usage": USAGE}]
    script = [
        {"type": "llm", "messages": MESSAGES},
        {"type": "act", "action": "List Files", "input": {"dir_path": "."}},
        {"type": "llm", "messages": MESSAGES},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "-"}},
    ]
    run = run_create(
        task=tiny_task.task, agent=AgentFactory(config={"script": script}), model="test-model", enqueue=False
    )

    run = run_execute(run.pk)

    assert run.status == "finished", run.error
    steps = list(run.steps.order_by("index"))
    assert [(step.action, step.tokens_in, step.llm_calls.count()) for step in steps] == [
        ("List Files", 900, 1),
        ("Final Answer", 900, 1),
    ]
    assert (run.tokens_in, run.tokens_out) == (1800, 80)
