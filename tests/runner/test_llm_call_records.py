"""A run's model calls are written with the action they answer: a session's ledger defers an answered call's record
(and the giving back of its endpoint slot) to the session's next statement, which for an agent's call is the start
of its action; a call whose agent does not act (it asks again, thinks long, or ends) is written all the same."""

import threading
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runner.execution import run_execute
from runner.execution.session import RunSession
from runner.llm.gateway import DEFER_MAX_S, CallLedger, calls_write, complete
from runner.models import LLMCall, Run
from runner.services import run_create

from ..factories import AgentFactory, RunFactory
from ..waiting import wait_for
from .test_llm_gateway import slots_held

MESSAGES = [{"role": "user", "content": "what next?"}]
USAGE = {"prompt_tokens": 900, "completion_tokens": 40}


@pytest.fixture
def run(tiny_task, endpoint):
    return RunFactory(task_version=tiny_task, agent=AgentFactory(), status=Run.Status.RUNNING, model="test-model")


def test_a_deferred_call_is_written_with_the_runs_next_fields_in_one_statement_that_gives_its_slot_back(
    run, endpoint, llm_server
):
    Run.objects.filter(pk=run.pk).update(max_tokens=100_000)
    run.refresh_from_db()
    ledger = CallLedger(run.pk, defers=True)
    llm_server.script = [{"content": "List the files.", "usage": USAGE}]

    complete(run=run, messages=MESSAGES, step_index=0, ledger=ledger)

    run.refresh_from_db()
    assert slots_held() == [(endpoint.pk, 0)] and not LLMCall.objects.filter(run=run).exists()
    assert (run.tokens_in, run.tokens_reserved > 0) == (0, True)  # its reservation holds until it is written
    with CaptureQueriesContext(connection) as queries:
        calls_write(ledger, live_action="List Files", live_output="")

    assert [query["sql"].split()[0] for query in queries.captured_queries] == ["WITH"]
    run.refresh_from_db()
    call = LLMCall.objects.get(run=run)
    assert (call.completion, call.step_index, call.tokens_in, call.cost) == (
        "List the files.",
        0,
        900,
        Decimal("0.00098"),
    )
    assert (run.tokens_in, run.tokens_out, run.tokens_reserved, run.live_action) == (900, 40, 0, "List Files")
    assert ledger.pending is None and slots_held() == []


def test_the_next_call_writes_the_one_before_it_first_and_finds_its_answer(run, llm_server):
    """An agent asking again in a step: the earlier call is written before the later one is made, so the later
    one's note on a repeated answer names it."""
    ledger = CallLedger(run.pk, defers=True)
    llm_server.default = "the same answer"

    complete(run=run, messages=MESSAGES, step_index=1, ledger=ledger, options={"temperature": 0.5})
    complete(run=run, messages=MESSAGES, step_index=1, ledger=ledger, options={"temperature": 0.5})
    calls_write(ledger)

    first, again = LLMCall.objects.filter(run=run).order_by("pk")
    assert first.pk and f"the same answer as the same request got (call {first.pk})" in again.error


@pytest.mark.django_db(transaction=True)
def test_a_session_writes_a_call_its_agent_has_not_acted_on_within_its_deferral(tiny_task, endpoint, llm_server):
    """The agent thinks for seconds after its answer: the run's tick writes the call meanwhile, before the action
    that would have carried it starts (the run's live action still empty)."""
    llm_server.script = [{"content": "think, then act", "usage": USAGE}]
    script = [
        {"type": "llm", "messages": MESSAGES},
        {"probe": "__import__('time').sleep(8)"},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "-"}},
    ]
    run = run_create(
        task=tiny_task.task, agent=AgentFactory(config={"script": script}), model="test-model", enqueue=False
    )
    ran = threading.Thread(target=lambda: (run_execute(run.pk), connection.close()))
    ran.start()
    try:
        before_acting = {"live_action": "", "steps_count": 0, "tokens_in": 900, "llm_calls__isnull": False}
        written = wait_for(
            lambda: Run.objects.filter(pk=run.pk, **before_acting).exists(),
            60,
            "the call written while its agent thinks",
        )
        assert slots_held() == []
    finally:
        ran.join()
    assert written and DEFER_MAX_S * 10 < 8
    assert Run.objects.get(pk=run.pk).status == "finished"


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
def test_an_agents_call_is_written_when_its_action_starts(tiny_task, endpoint, llm_server):
    """The research agent's step: a call, then the action it chose. The call's row, its tokens and the action's
    live line are one statement, and the step that follows counts the call."""
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

    with CaptureQueriesContext(connection) as queries:
        run = run_execute(run.pk)

    assert run.status == "finished", run.error
    records = [query["sql"] for query in queries.captured_queries if "INSERT INTO runner_llmcall" in query["sql"]]
    assert len(records) == 2
    assert """"live_action" = 'List Files'""" in records[0] and """"live_action" = 'Final Answer'""" in records[1]
    steps = list(run.steps.order_by("index"))
    assert [(step.action, step.tokens_in, step.llm_calls.count()) for step in steps] == [
        ("List Files", 900, 1),
        ("Final Answer", 900, 1),
    ]
    assert (run.tokens_in, run.tokens_out) == (1800, 80)


def test_a_sessions_tick_writes_a_call_deferred_longer_than_it_may_wait(run, llm_server):
    session = RunSession(run)
    llm_server.script = ["ok"]
    complete(run=run, messages=MESSAGES, step_index=0, ledger=session.calls)

    session.tick()  # at once: the call may still wait for the agent's action
    assert not LLMCall.objects.filter(run=run).exists()
    session.calls.pending.since -= DEFER_MAX_S
    session.tick()
    assert LLMCall.objects.filter(run=run).count() == 1 and session.calls.pending is None
