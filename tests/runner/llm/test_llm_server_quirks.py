"""What real OpenAI-compatible servers do that the OpenAI API does not, and how the gateway copes: a stop sequence
left in the answer (transformers serve), temperature ignored (greedy decoding), and a slow server whose answers
need more time than a fixed timeout gives. The scripted server plays each quirk; tests/integration/
test_real_llm_server.py meets them on a real server."""

import json

import pytest

from runner.llm.gateway import LLMError, call_timeout, complete, endpoints_sync
from runner.models import LLMCall, ModelEndpoint, Run
from tests.factories import AgentFactory, RunFactory

MESSAGES = [{"role": "user", "content": "Answer in the format."}]
STOP = {"stop": ["Observation:"], "temperature": 0.5, "max_tokens": 50}


@pytest.fixture
def run(tiny_task, endpoint):
    return RunFactory(task_version=tiny_task, agent=AgentFactory(), status=Run.Status.RUNNING, model="test-model")


def test_a_stop_sequence_left_at_the_end_of_the_answer_is_cut_and_said(run, llm_server):
    llm_server.script = ["Thought: look\nAction: List Files\nObservation:"]

    result = complete(run=run, messages=MESSAGES, options=STOP)

    assert result.text == "Thought: look\nAction: List Files\n"
    call = LLMCall.objects.get(run=run)
    assert call.completion == result.text
    assert "left the stop sequence 'Observation:' in its answer" in call.error


def test_an_answer_that_runs_past_its_stop_sequence_ends_before_the_first_one(run, llm_server):
    llm_server.script = ["Action: List Files\nObservation: made up\nAction: Final Answer\nObservation: more"]

    assert complete(run=run, messages=MESSAGES, options=STOP).text == "Action: List Files\n"


def test_an_answer_without_its_stop_sequence_is_kept_whole_with_no_note(run, llm_server):
    llm_server.script = ["Action: List Files\n"]

    assert complete(run=run, messages=MESSAGES, options=STOP).text == "Action: List Files\n"
    assert LLMCall.objects.get(run=run).error == ""


def test_a_stop_sequence_is_not_cut_when_the_request_named_none(run, llm_server):
    llm_server.script = ["Observation: it stays"]

    assert complete(run=run, messages=MESSAGES, options={"max_tokens": 50}).text == "Observation: it stays"


def test_the_same_sampled_answer_again_in_a_step_is_noted_as_temperature_ignored(run, llm_server):
    llm_server.default = "I would rather chat."

    complete(run=run, messages=MESSAGES, step_index=2, options=STOP)
    complete(run=run, messages=MESSAGES, step_index=2, options=STOP)
    longer = [{"role": "user", "content": MESSAGES[0]["content"] + " Answer again, in the format."}]
    complete(run=run, messages=longer, step_index=2, options=STOP)

    first, again, retried = LLMCall.objects.filter(run=run).order_by("pk")
    assert first.error == ""
    assert f"the same answer as the same request got (call {first.pk}) at temperature 0.5" in again.error
    assert "ignore temperature" in again.error
    assert f"the same answer as an earlier request of this step got (call {again.pk})" in retried.error


def test_a_repeated_answer_is_not_noted_when_greedy_was_asked_for_or_in_another_step(run, llm_server):
    llm_server.default = "same"

    complete(run=run, messages=MESSAGES, step_index=1, options={"temperature": 0, "max_tokens": 5})
    complete(run=run, messages=MESSAGES, step_index=1, options={"temperature": 0, "max_tokens": 5})
    complete(run=run, messages=MESSAGES, step_index=2, options=STOP)

    assert [c.error for c in LLMCall.objects.filter(run=run)] == ["", "", ""]


def test_the_same_answer_to_another_callers_question_in_the_step_is_not_noted(run, llm_server):
    llm_server.default = "fine"

    complete(run=run, messages=MESSAGES, step_index=1, options=STOP, purpose="agent")
    other = [{"role": "user", "content": "Reflect on the run so far."}]
    complete(run=run, messages=other, step_index=1, options=STOP, purpose="Reflection")

    assert [c.error for c in LLMCall.objects.filter(run=run).order_by("pk")] == ["", ""]


def test_the_timeout_grows_with_the_answers_token_budget_at_the_stated_speed(endpoint):
    assert call_timeout(endpoint, 2000) == 5  # no speed stated: timeout_s for every call
    endpoint.output_tokens_per_s = 2
    assert call_timeout(endpoint, 2000) == 5 + 1000
    assert call_timeout(endpoint, 10) == 5 + 5


def test_a_call_cut_at_its_timeout_says_which_timeout_and_why(run, endpoint, llm_server, settings):
    settings.BENCH_LLM_MAX_RETRIES = 0
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(timeout_s=0.2, output_tokens_per_s=20)
    llm_server.default = {"content": "late", "delay": 2}

    with pytest.raises(LLMError) as exc:
        complete(run=run, messages=MESSAGES, options={"max_tokens": 10})

    assert exc.value.kind == "infrastructure"
    assert "no answer within 0.7 s: the endpoint's timeout_s of 0.2 s plus 10 tokens at 20 tokens/s" in str(exc.value)
    assert "no answer within 0.7 s" in LLMCall.objects.get(run=run).error


def test_a_call_within_its_sized_timeout_is_answered(run, endpoint, llm_server):
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(timeout_s=0.2, output_tokens_per_s=1)
    llm_server.script = [{"content": "slow but sure", "delay": 1}]

    assert complete(run=run, messages=MESSAGES, options={"max_tokens": 10}).text == "slow but sure"


def test_a_call_cut_at_a_fixed_timeout_suggests_sizing_it(run, endpoint, llm_server, settings):
    settings.BENCH_LLM_MAX_RETRIES = 0
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(timeout_s=0.2)
    llm_server.default = {"content": "late", "delay": 2}

    with pytest.raises(LLMError, match="timeout of 0.2 s for up to 10 tokens .*set output_tokens_per_s"):
        complete(run=run, messages=MESSAGES, options={"max_tokens": 10})


def test_endpoints_from_configuration_may_state_their_speed(db):
    (endpoint,) = endpoints_sync([{"name": "slow-box", "base_url": "http://127.0.0.1:1/v1", "output_tokens_per_s": 2}])
    assert endpoint.output_tokens_per_s == 2


@pytest.mark.parametrize("bad", [0, -1, "fast", True])
def test_a_speed_or_timeout_that_is_not_a_positive_number_is_refused_and_nothing_is_written(db, bad):
    specs = [
        {"name": "fine", "base_url": "http://127.0.0.1:1/v1"},
        {"name": "slow-box", "base_url": "http://127.0.0.1:1/v1", "output_tokens_per_s": bad},
    ]
    with pytest.raises(ValueError, match="output_tokens_per_s of model endpoint slow-box must be a number above 0"):
        endpoints_sync(specs)
    specs[1] = {"name": "slow-box", "base_url": "http://127.0.0.1:1/v1", "timeout_s": bad}
    with pytest.raises(ValueError, match="timeout_s of model endpoint slow-box must be a number above 0"):
        endpoints_sync(specs)
    assert not ModelEndpoint.objects.exists()


def chat_completion(message: object, **fields) -> dict:
    """A 200 answer with ``message`` as its first choice's message and ``fields`` beside its choices."""
    return {"body": json.dumps({"object": "chat.completion", "choices": [{"message": message}], **fields}).encode()}


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"body": b'{"object": "error", "detail": "overloaded"}'}, 'the response has no choices: {"object": "error"'),
        ({"body": b"[]"}, "the response has no choices: []"),
        (chat_completion("just text"), "the response has no choices"),
        (chat_completion({"role": "assistant", "content": 42}), "the message content is not text: 42"),
    ],
)
def test_json_that_is_no_chat_completion_is_retried_then_reported(run, llm_server, settings, body, said):
    settings.BENCH_LLM_MAX_RETRIES = 1
    llm_server.default = body

    with pytest.raises(LLMError) as exc:
        complete(run=run, messages=MESSAGES)

    assert exc.value.kind == "infrastructure" and len(llm_server.requests) == 2
    assert said in str(exc.value) and said in LLMCall.objects.get(run=run).error


@pytest.mark.parametrize(
    ("usage", "said"),
    [
        (None, "the endpoint reported no usage; tokens estimated from characters"),
        ({"prompt_tokens": "many", "completion_tokens": 3}, "usage that is no token counts ({'prompt_tokens': 'many'"),
        ({"prompt_tokens": -5, "completion_tokens": 3}, "usage that is no token counts"),
        ("lots", "usage that is no token counts (lots)"),
    ],
)
def test_usage_that_cannot_be_counted_is_estimated_and_said(run, llm_server, usage, said):
    answer = {"role": "assistant", "content": "x" * 40}
    llm_server.script = [chat_completion(answer, **({} if usage is None else {"usage": usage}))]

    result = complete(run=run, messages=MESSAGES)

    assert (result.tokens_in, result.tokens_out) == (len(json.dumps(MESSAGES)) // 4 + 1, 10)
    assert said in LLMCall.objects.get(run=run).error


def test_usage_the_endpoint_reports_is_counted_as_it_is(run, llm_server):
    llm_server.script = [chat_completion({"content": "ok"}, usage={"prompt_tokens": 12, "completion_tokens": 0})]

    assert (complete(run=run, messages=MESSAGES).tokens_in, LLMCall.objects.get(run=run).error) == (12, "")


def test_an_answer_larger_than_any_completion_is_not_read_whole_nor_retried(run, llm_server, settings, monkeypatch):
    """A sick server streaming without end never fills the worker's memory: past MAX_ANSWER_BYTES the answer is cut
    off, its connection dropped, and the next call gets a fresh one."""
    from runner.llm import gateway

    settings.BENCH_LLM_MAX_RETRIES = 2
    monkeypatch.setattr(gateway, "MAX_ANSWER_BYTES", 64)
    llm_server.script = [{"content": "x" * 200}]

    with pytest.raises(LLMError) as exc:
        complete(run=run, messages=MESSAGES)

    assert exc.value.kind == "infrastructure" and len(llm_server.requests) == 1
    assert "the answer is over 64 bytes" in str(exc.value)
    monkeypatch.setattr(gateway, "MAX_ANSWER_BYTES", 32 << 20)
    llm_server.script = ["fine"]
    assert complete(run=run, messages=MESSAGES).text == "fine"
