"""Function calling through the gateway, as OpenAI's protocol has it: the functions an agent offers (``tools``,
``tool_choice``) reach the endpoint as sent, the functions the model calls come back (``tool_calls``), the
conversation goes on with the assistant's calls and the ``tool`` messages answering them, and every part is
recorded, counted against the budgets and shown."""

import json

import pytest
from django.urls import reverse

from runner.llm.gateway import LLMError, complete, completion_for_run, prompt_bound
from runner.models import LLMCall, Run
from tests.factories import AgentFactory, RunFactory, StepFactory

REVIEW = {
    "type": "function",
    "function": {
        "name": "submit_review",
        "description": "Submit a review evaluating the output of the training script.",
        "parameters": {
            "type": "object",
            "properties": {"is_bug": {"type": "boolean"}, "metric": {"type": "number"}},
            "required": ["is_bug", "metric"],
        },
    },
}
CHOICE = {"type": "function", "function": {"name": "submit_review"}}
ARGUMENTS = '{"is_bug": false, "metric": 0.93}'
CALL = {"id": "call_1", "type": "function", "function": {"name": "submit_review", "arguments": ARGUMENTS}}
ASK = [{"role": "system", "content": "Review the output: accuracy 0.93"}]


@pytest.fixture
def run(tiny_task, endpoint):
    return RunFactory(task_version=tiny_task, agent=AgentFactory(), status=Run.Status.RUNNING, model="test-model")


def test_offered_functions_reach_the_endpoint_and_its_calls_come_back_recorded(run, llm_server):
    llm_server.script = [{"content": None, "tool_calls": [CALL]}]

    result = complete(run=run, messages=ASK, step_index=2, options={"tools": [REVIEW], "tool_choice": CHOICE})

    sent = llm_server.requests[0]
    assert (sent["tools"], sent["tool_choice"]) == ([REVIEW], CHOICE)  # as the agent sent them
    assert result.text == "" and result.tool_calls == [CALL]
    call = LLMCall.objects.get(run=run)
    assert call.tools == {"tools": [REVIEW], "tool_choice": CHOICE} and call.tool_calls == [CALL]
    assert call.recorded_bytes >= len(json.dumps(REVIEW)) + len(json.dumps(CALL))

    # The conversation goes on: the assistant's calls (content null) and the tool's answer, sent as they are.
    llm_server.script = ["It has no bug."]
    follow = [*ASK, {"role": "assistant", "content": None, "tool_calls": [CALL]}]
    follow.append({"role": "tool", "tool_call_id": "call_1", "content": "recorded"})
    assert complete(run=run, messages=follow, options={"tools": [REVIEW]}).text == "It has no bug."
    assert llm_server.requests[1]["messages"] == follow
    assert LLMCall.objects.filter(run=run).order_by("pk").last().tool_calls == []


def test_the_agent_protocol_answers_with_the_calls(run, llm_server):
    llm_server.script = [{"content": "Reviewing.", "tool_calls": [CALL]}, "plain"]
    message = {"type": "llm", "messages": ASK, "tools": [REVIEW], "tool_choice": "required", "purpose": "review"}

    answer = completion_for_run(run=run, step_index=0, message=message, tick=lambda: None)
    plain = completion_for_run(run=run, step_index=0, message={"type": "llm", "messages": ASK}, tick=lambda: None)

    assert answer["type"] == "completion" and answer["text"] == "Reviewing." and answer["tool_calls"] == [CALL]
    assert llm_server.requests[0]["tool_choice"] == "required"
    assert "tool_calls" not in plain and "tools" not in llm_server.requests[1]  # nothing offered, nothing sent


@pytest.mark.parametrize(
    ("options", "messages", "said"),
    [
        ({"tools": [{"type": "function", "function": {}}]}, ASK, "tools must be a list of"),
        ({"tools": []}, ASK, "tools must be a list of"),
        ({"tools": [REVIEW], "tool_choice": "always"}, ASK, "tool_choice must be one of none, auto, required"),
        ({"tool_choice": "auto"}, ASK, "tool_choice needs tools"),
        ({}, [{"role": "tool", "content": "42"}], "message 0 is a tool message without a tool_call_id"),
        ({}, [{"role": "user", "content": None}], "message 0's content is not text"),
        ({}, [{"role": "user", "content": "x", "tool_calls": [CALL]}], "message 0's tool_calls are not an assistant"),
        ({}, [{"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}], "tool_calls are not"),
    ],
)
def test_a_malformed_offer_or_conversation_is_refused_before_any_request(run, llm_server, options, messages, said):
    with pytest.raises(LLMError) as exc:
        complete(run=run, messages=messages, options=options)
    assert exc.value.kind == "request" and said in str(exc.value)
    assert llm_server.requests == []


def test_calls_that_are_no_function_calls_are_the_endpoints_fault(run, llm_server, settings):
    settings.BENCH_LLM_MAX_RETRIES = 1
    llm_server.default = {"content": None, "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}]}
    with pytest.raises(LLMError) as exc:
        complete(run=run, messages=ASK, options={"tools": [REVIEW]})
    assert exc.value.kind == "infrastructure" and "tool_calls are not a list of" in str(exc.value)
    assert len(llm_server.requests) == 2  # asked again once, as for any answer that is no chat completion


def test_the_functions_offered_count_toward_the_budget(run, llm_server):
    with_tools = prompt_bound(ASK, [REVIEW])
    assert with_tools - prompt_bound(ASK) >= len(json.dumps(REVIEW))
    # A budget the messages fit but not the messages with the functions offered: refused before the request.
    Run.objects.filter(pk=run.pk).update(max_tokens=with_tools + 5 - 1)
    run.refresh_from_db()
    with pytest.raises(LLMError) as exc:
        complete(run=run, messages=ASK, options={"tools": [REVIEW], "max_tokens": 5})
    assert exc.value.kind == "budget" and llm_server.requests == []
    llm_server.script = [{"content": None, "tool_calls": [CALL], "usage": None}]  # no usage: estimated
    assert complete(run=run, messages=ASK, options={"max_tokens": 5}).tool_calls == [CALL]
    assert LLMCall.objects.get(run=run).tokens_out == len(json.dumps([CALL])) // 4


def test_the_run_page_shows_the_functions_offered_and_called(client, run, llm_server):
    step = StepFactory(run=run, index=0)
    llm_server.script = [{"content": None, "tool_calls": [CALL]}]
    complete(run=run, messages=ASK, step_index=0, options={"tools": [REVIEW], "tool_choice": CHOICE})
    LLMCall.objects.filter(run=run).update(step=step)

    page = client.get(reverse("runner:step_llm_calls", args=[run.pk, 0])).content.decode()

    assert "Functions offered:" in page and "<code>submit_review</code>" in page
    assert "calls submit_review({&quot;is_bug&quot;: false, &quot;metric&quot;: 0.93}) (call_1)" in page


def test_the_sdks_chat_offers_functions_and_returns_the_calls():
    import io

    from mlab_agents.sdk import Env

    answers = [{"type": "start", "task": {}}, {"type": "completion", "text": "", "tool_calls": [CALL]}]
    answers.append({"type": "completion", "text": "plain"})
    written = io.StringIO()
    env = Env(io.StringIO("".join(json.dumps(a) + "\n" for a in answers)), written)

    reply = env.chat(ASK, tools=[REVIEW], tool_choice=CHOICE, purpose="review")
    assert reply["tool_calls"] == [CALL]
    assert env.chat("hello")["tool_calls"] == []  # none made: an empty list, not a missing key
    sent = json.loads(written.getvalue().splitlines()[0])
    assert (sent["type"], sent["tools"], sent["tool_choice"], sent["purpose"]) == ("llm", [REVIEW], CHOICE, "review")


def test_the_functions_offered_count_toward_the_bytes_a_step_may_record(run, llm_server, settings):
    # An agent cannot record past the bound by moving its prompt into the functions it offers.
    settings.BENCH_LLM_RECORDED_MB_PER_STEP = 1
    bulky = {"type": "function", "function": {"name": "f", "description": "x" * 1_100_000}}
    with pytest.raises(LLMError) as exc:
        complete(run=run, messages=ASK, options={"tools": [bulky]})
    assert exc.value.kind == "budget" and "more than one step may record (1 MB)" in str(exc.value)
    assert llm_server.requests == [] and not LLMCall.objects.filter(run=run).exists()
