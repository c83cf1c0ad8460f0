"""The built-in agents on real tasks: the tuner from its own search, the research agent against a scripted
model behind the real gateway."""

import json
import re

import pytest

from runner.agents.builtin import agents_builtin_ensure
from runner.execution import run_execute
from runner.models import LLMCall, Run, RunLimits, Step
from runner.services import run_create


def agent(name: str):
    return next(a for a in agents_builtin_ensure() if a.name == name)


@pytest.mark.django_db(transaction=True)
def test_the_tuner_beats_the_digits_baseline_from_its_own_search(digits):
    run = run_execute(run_create(task=digits.task, agent=agent("tuner"), enqueue=False).pk)

    digits.refresh_from_db()
    assert run.status == "finished", (run.error, run.stderr_tail)
    assert run.final_score > digits.baseline_score
    assert run.improvement >= 0.10 and run.succeeded is True
    steps = list(Step.objects.filter(run=run))
    assert steps[0].action == "List Files" and steps[-1].action == "Final Answer"
    for step in steps:
        assert {"Reflection", "Research Plan and Status", "Fact Check", "Thought"} <= set(step.entries)
    kept = [s for s in steps if "keep it" in s.entries["Reflection"]]
    assert kept, "the tuner kept no change"
    assert "baseline" in steps[-1].action_input["final_answer"]


def answer(action: str, action_input: dict, thought: str = "next") -> str:
    return (
        f"Reflection: the observation is as expected.\nResearch Plan and Status: 1. **{thought}**\n"
        f"Fact Check: nothing new\nThought: {thought}\nAction: {action}\nAction Input: {json.dumps(action_input)}"
    )


@pytest.fixture
def research(endpoint):
    return agent("research")


@pytest.mark.django_db(transaction=True)
def test_the_research_agent_completes_a_run_and_its_entries_tokens_and_cost_are_recorded(
    tiny_task, research, llm_server
):
    llm_server.script = [
        answer("Execute Script", {"script_name": "train.py"}, "measure the baseline"),
        "I am not sure what to do next.",  # malformed: re-asked with a format reminder
        answer("Write File", {"file_name": "value.txt", "content": "9"}, "write a bigger value"),
        answer("Final Answer", {"final_answer": "value.txt holds 9"}, "submit"),
    ]
    run = run_execute(run_create(task=tiny_task.task, agent=research, model="test-model", enqueue=False).pk)

    assert run.status == "finished", (run.error, run.stderr_tail)
    assert run.final_score == 9.0 and run.succeeded is True
    steps = list(Step.objects.filter(run=run))
    assert [s.action for s in steps] == ["Execute Script", "Write File", "Final Answer"]
    assert steps[0].entries["Thought"] == "measure the baseline"
    assert steps[0].entries["Research Plan and Status"] == "1. **measure the baseline**"
    assert set(steps[1].entries) == {"Reflection", "Research Plan and Status", "Fact Check", "Thought"}
    # 4 completions (one of them the malformed answer) at 11 prompt + 7 completion tokens, 1 and 2 per million.
    assert LLMCall.objects.filter(run=run).count() == 4
    assert (run.tokens_in, run.tokens_out) == (44, 28)
    assert float(run.cost) == pytest.approx((44 * 1 + 28 * 2) / 1e6)
    assert sum(s.tokens_in for s in steps) == 44
    reminder = llm_server.requests[2]["messages"][0]["content"]
    assert "with every one of these entries: Reflection, Research Plan and Status, Fact Check, Thought" in reminder
    # The history window carries the previous step's observation into the next prompt.
    assert "training" in llm_server.requests[2]["messages"][0]["content"]


@pytest.mark.django_db(transaction=True)
def test_a_token_budget_that_runs_out_ends_the_run_as_a_limit(tiny_task, research, llm_server):
    usage = {"prompt_tokens": 1500, "completion_tokens": 500}
    llm_server.script = [{"content": answer("Execute Script", {"script_name": "train.py"}), "usage": usage}]
    llm_server.default = {"content": answer("List Files", {"dir_path": "."}), "usage": usage}
    run = run_create(
        task=tiny_task.task, agent=research, model="test-model", enqueue=False, limits=RunLimits(max_tokens=24000)
    )
    run = run_execute(run.pk)

    assert run.status == "failed" and run.failure_kind == "limit"
    # Each call reserves its prompt at one token a byte plus max_tokens 2,000: the budget refuses the call that could
    # pass it, not only the one that would on the endpoint's own count.
    assert "token budget of 24000 would be exceeded" in run.error
    calls = LLMCall.objects.filter(run=run).count()
    assert calls >= 2 and run.steps_count == calls  # every call that was made led to a step; the next was refused
    assert run.tokens_in + run.tokens_out == 2000 * calls <= 24000
    assert run.final_score == 2.0  # the workspace is still evaluated


@pytest.mark.django_db(transaction=True)
def test_a_model_server_that_keeps_failing_ends_the_run_as_infrastructure(tiny_task, research, llm_server, settings):
    settings.BENCH_LLM_MAX_RETRIES = 2
    llm_server.default = {"status": 502}
    run = run_execute(run_create(task=tiny_task.task, agent=research, model="test-model", enqueue=False).pk)

    assert run.status == "failed" and run.failure_kind == "infrastructure"
    assert re.search(r"failed 3 times: HTTP 502", run.error)
    assert Run.objects.get(pk=run.pk).steps_count == 0


@pytest.mark.django_db(transaction=True)
def test_the_research_agent_improves_a_builtin_task_with_its_fast_model_and_a_three_step_window(
    digits, endpoint, llm_server
):
    from runner.models import Agent, ModelEndpoint
    from task_bank.services import BUILTIN_DIR

    ModelEndpoint.objects.create(name="test-fast", base_url=llm_server.base_url, model_id="scripted-fast", timeout_s=5)
    agent = Agent.objects.create(name="research-fast", entrypoint="mlab_agents.research")
    starter = (BUILTIN_DIR / "digits" / "env" / "train.py").read_text()
    slow_line = "RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0)"
    assert slow_line in starter
    improved = starter.replace(slow_line, "RandomForestClassifier(n_estimators=300, random_state=0)")
    plan = [
        answer("Write File", {"file_name": "marker_one.txt", "content": "x"}, "leave a marker"),
        answer(
            "Edit Script (AI)",
            {"script_name": "train.py", "edit_instruction": "use 300 deeper trees", "save_name": "train.py"},
            "a bigger forest",
        ),
        answer("Execute Script", {"script_name": "train.py"}, "measure it"),
        answer("List Files", {"dir_path": "."}, "check the submission"),
        answer("Final Answer", {"final_answer": "a 300-tree forest"}, "submit"),
    ]
    agent_prompts = []

    def reply(request):
        if request["model"] == "scripted-fast":
            return f"```python\n{improved}```"
        agent_prompts.append(request["messages"][0]["content"])
        return plan[len(agent_prompts) - 1]

    llm_server.default = reply
    run = run_execute(
        run_create(task=digits.task, agent=agent, model="test-model", fast_model="test-fast", enqueue=False).pk
    )

    digits.refresh_from_db()
    assert run.status == "finished", (run.error, run.stderr_tail)
    assert [s.action for s in Step.objects.filter(run=run)] == [
        "Write File", "Edit Script (AI)", "Execute Script", "List Files", "Final Answer"
    ]  # fmt: skip
    assert run.final_score > digits.baseline_score and run.succeeded is True
    # The edit went to the fast model, the decisions to the run's model.
    assert list(LLMCall.objects.filter(run=run, purpose="edit script").values_list("model", flat=True)) == [
        "scripted-fast"
    ]
    assert LLMCall.objects.filter(run=run, purpose="agent", model="scripted-1").count() == 5
    # The prompt keeps the last three steps: the first step's observation is there for steps 2 to 4, then gone.
    marker = "File marker_one.txt written successfully."
    assert [marker in p for p in agent_prompts] == [False, True, True, True, False]
    assert "validation accuracy" in agent_prompts[4] and "+model = RandomForestClassifier" in agent_prompts[4]


@pytest.mark.django_db(transaction=True)
def test_a_cost_budget_that_runs_out_ends_the_run_as_a_limit(tiny_task, research, llm_server):
    from decimal import Decimal

    usage = {"prompt_tokens": 1000, "completion_tokens": 1000}  # 0.003 per call at 1 and 2 per million
    llm_server.script = [{"content": answer("Execute Script", {"script_name": "train.py"}), "usage": usage}]
    llm_server.default = {"content": answer("List Files", {"dir_path": "."}), "usage": usage}
    run = run_create(
        task=tiny_task.task,
        agent=research,
        model="test-model",
        enqueue=False,
        limits=RunLimits(max_cost=Decimal("0.03")),
    )
    run = run_execute(run.pk)

    assert run.status == "failed" and run.failure_kind == "limit"
    assert "cost budget of 0.03" in run.error
    calls = LLMCall.objects.filter(run=run).count()
    assert calls >= 2 and run.steps_count == calls and len(llm_server.requests) == calls
    assert run.cost == Decimal("0.003") * calls <= Decimal("0.03")
    assert run.final_score == 2.0  # the workspace is still evaluated


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "problem, expected",
    [
        ("no key", "environment variable BENCH_TEST_KEY is empty on this worker"),
        ("unreachable", "test-model failed 2 times: no connection to http://127.0.0.1:9/v1"),
    ],
)
def test_an_endpoint_without_its_key_or_out_of_reach_fails_the_run_with_a_clear_error(
    client, admin_client, tiny_task, research, endpoint, monkeypatch, settings, problem, expected
):
    from django.urls import reverse

    from runner.models import ModelEndpoint

    settings.BENCH_LLM_MAX_RETRIES = 1
    monkeypatch.delenv("BENCH_TEST_KEY", raising=False)
    if problem == "no key":
        ModelEndpoint.objects.filter(pk=endpoint.pk).update(api_key_env="BENCH_TEST_KEY")
    else:
        ModelEndpoint.objects.filter(pk=endpoint.pk).update(base_url="http://127.0.0.1:9/v1", timeout_s=1)
    run = run_execute(run_create(task=tiny_task.task, agent=research, model="test-model", enqueue=False).pk)

    assert run.status == "failed" and run.failure_kind == "infrastructure"
    assert expected in run.error
    page = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    assert expected in page
    # value.txt was never written, so eval.py failed: the public sees its last line, staff the traceback too.
    assert "FileNotFoundError" in page and "Traceback" not in page and "/task/scripts/eval.py" not in page
    staff_page = admin_client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    assert "Traceback" in staff_page and "/task/scripts/eval.py" in staff_page
