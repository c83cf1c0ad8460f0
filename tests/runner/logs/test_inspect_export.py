"""Runs exported as Inspect AI eval logs, read back by the library itself (``inspect_ai.log.read_eval_log``): if
the library cannot read what we write, or reads something else than the run, the test fails."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from inspect_ai.event import ModelEvent, ToolEvent
from inspect_ai.log import list_eval_logs, read_eval_log

from runner.execution import run_execute
from runner.logs.inspect_export import SCORER
from runner.models import LLMCall, Run
from runner.services import run_create
from tests.factories import AgentFactory

THINK = {
    "type": "llm",
    "messages": [{"role": "system", "content": "You are a researcher."}, {"role": "user", "content": "what next?"}],
}
SCRIPT = [
    THINK,
    {"type": "act", "action": "List Files", "input": {"dir_path": "."}},
    THINK,
    {"type": "act", "action": "Write File", "input": {"file_name": "value.txt", "content": "5"}},
    {"type": "act", "action": "Read File", "input": {"file_name": "missing.txt"}},
    {"type": "act", "action": "Final Answer", "input": {"final_answer": "value.txt holds 5"}},
]


def thinking_run(version, llm_server) -> Run:
    """A run executed here: two model calls, a step that fails, and a score above the baseline (5 against 2)."""
    llm_server.script = ["List the files first.", "Write a larger value."]
    agent = AgentFactory(name="thinker", config={"script": SCRIPT})
    run = run_create(task=version.task, agent=agent, model="test-model", enqueue=False)
    return run_execute(run.pk)


@pytest.fixture
def scored_run(tiny_task_ready, endpoint, llm_server):
    return thinking_run(tiny_task_ready, llm_server)


@pytest.mark.django_db(transaction=True)
def test_a_run_is_an_inspect_log_the_library_reads_as_the_run(scored_run, tmp_path):
    run = scored_run
    assert (run.status, run.final_score) == ("finished", 5.0)
    out = tmp_path / "run.json"

    call_command("export_log", str(run.pk), str(out), "--format", "inspect")

    log = read_eval_log(str(out))
    assert log.status == "success" and log.eval.task == "tiny" and log.eval.task_version == run.task_version.number
    assert log.eval.model == "test-model" and log.eval.solver == f"thinker@{run.agent.version}"
    [sample] = log.samples
    assert (sample.id, sample.epoch, sample.input) == (run.pk, 1, run.task_version.research_problem)
    steps = list(run.steps.order_by("index"))

    # The steps as tool events, in order, with their input, observation and timing.
    tools = [e for e in sample.events if isinstance(e, ToolEvent)]
    assert [e.function for e in tools] == [s.action for s in steps]
    assert [e.arguments for e in tools] == [s.action_input for s in steps]
    assert [e.result for e in tools] == [s.observation for s in steps]
    assert [e.timestamp for e in tools] == [s.started_at for s in steps]
    assert [e.working_time for e in tools] == [s.duration_s for s in steps]
    assert [e.error is not None for e in tools] == [s.is_error for s in steps] == [False, False, True, False]

    # Each model call as a model event: its prompt, its completion, its usage, before the step it was made for.
    models = [e for e in sample.events if isinstance(e, ModelEvent)]
    calls = list(LLMCall.objects.filter(run=run).order_by("created_at"))
    assert [e.output.completion for e in models] == ["List the files first.", "Write a larger value."]
    assert [(m.role, m.text) for m in models[0].input] == [("system", "You are a researcher."), ("user", "what next?")]
    assert [e.output.usage.input_tokens for e in models] == [c.tokens_in for c in calls]
    order = [type(e).__name__ for e in sample.events if isinstance(e, ModelEvent | ToolEvent)]
    assert order == ["ModelEvent", "ToolEvent", "ModelEvent", "ToolEvent", "ToolEvent", "ToolEvent"]

    # The conversation: the problem, then each action called as a tool and its observation answering it.
    assert [m.role for m in sample.messages] == ["user"] + ["assistant", "tool"] * len(steps)
    assert sample.messages[1].text == "List the files first."
    assert [m.tool_calls[0].function for m in sample.messages[1::2]] == [s.action for s in steps]
    assert [m.text for m in sample.messages[2::2]] == [s.observation for s in steps]
    assert sample.messages[6].error is not None
    assert sample.output.completion == "value.txt holds 5"

    # The score with its baseline and improvement; usage and timing as Inspect records them.
    score = sample.scores[SCORER]
    assert score.value == 5.0 and score.answer == "value.txt holds 5"
    assert score.metadata["baseline"] == 2.0 and score.metadata["improvement"] == pytest.approx(1.5)
    assert score.metadata["succeeded"] is True
    assert log.results.scores[0].metrics["mean"].value == 5.0
    usage = sample.model_usage["test-model"]
    assert (usage.input_tokens, usage.output_tokens) == (run.tokens_in, run.tokens_out) and run.tokens_in > 0
    assert log.stats.model_usage["test-model"].total_tokens == run.tokens_in + run.tokens_out
    assert sample.working_time == run.wall_seconds and sample.total_time >= run.wall_seconds
    assert sample.started_at == run.started_at.isoformat() and sample.error is None and sample.limit is None
    # The platform's fields Inspect has no place for.
    extras = sample.metadata["mlab_bench"]
    assert (extras["run"], extras["task"], extras["agent"], extras["status"]) == (run.pk, "tiny", "thinker", "finished")


@pytest.mark.django_db(transaction=True)
def test_a_run_that_failed_is_a_sample_with_its_error_and_no_score(tiny_task, tmp_path):
    agent = AgentFactory(config={"script": [{"exit": 3, "stderr": "the agent gave up"}]})
    run = run_execute(run_create(task=tiny_task.task, agent=agent, enqueue=False).pk)
    assert run.status == "failed" and run.final_score is None
    out = tmp_path / "failed.json"

    call_command("export_log", str(run.pk), str(out), "--format", "inspect")

    [sample] = read_eval_log(str(out)).samples
    assert sample.error is not None and sample.error.traceback == run.error
    assert not sample.scores and sample.metadata["mlab_bench"]["status"] == "failed"


@pytest.mark.django_db(transaction=True)
def test_a_batch_is_one_log_with_a_sample_per_run(tiny_task, tmp_path):
    from runner.models import Batch

    agent = AgentFactory(config={"script": [{"type": "act", "action": "Final Answer", "input": {"final_answer": "-"}}]})
    batch = Batch.objects.create(agent=agent)
    runs = [run_execute(run_create(task=tiny_task.task, agent=agent, enqueue=False).pk) for _ in range(2)]
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(batch=batch)
    other = run_execute(run_create(task=tiny_task.task, agent=agent, enqueue=False).pk)
    out = tmp_path / "batch.json"

    call_command("export_log", str(batch.pk), str(out), "--format", "inspect", "--batch")

    log = read_eval_log(str(out))
    assert (
        sorted(s.id for s in log.samples) == sorted(r.pk for r in runs) and other.pk not in log.eval.dataset.sample_ids
    )
    assert log.results.total_samples == 2 and log.eval.metadata["mlab_bench"]["batch"] == batch.pk
    with pytest.raises(CommandError, match="no runs in batch"):
        call_command("export_log", "999999", str(out), "--format", "inspect", "--batch")


@pytest.mark.django_db(transaction=True)
def test_the_written_log_is_json_that_inspect_reads_from_standard_output(tiny_task, capsys):
    agent = AgentFactory(config={"script": [{"type": "act", "action": "Final Answer", "input": {"final_answer": "-"}}]})
    run = run_execute(run_create(task=tiny_task.task, agent=agent, enqueue=False).pk)

    call_command("export_log", str(run.pk), "-", "--format", "inspect")

    data = json.loads(capsys.readouterr().out)
    assert data["samples"][0]["id"] == run.pk and data["version"] == 2


@pytest.mark.django_db(transaction=True)
def test_a_log_written_to_a_folder_is_named_so_that_inspect_lists_it(tiny_task, tmp_path):
    agent = AgentFactory(config={"script": [{"type": "act", "action": "Final Answer", "input": {"final_answer": "-"}}]})
    run = run_execute(run_create(task=tiny_task.task, agent=agent, enqueue=False).pk)

    call_command("export_log", str(run.pk), str(tmp_path), "--format", "inspect")

    [listed] = list_eval_logs(str(tmp_path))
    assert listed.task == "tiny" and read_eval_log(listed).samples[0].id == run.pk


@pytest.mark.django_db(transaction=True)
def test_a_run_stopped_at_its_step_limit_is_a_sample_at_inspects_turn_limit(tiny_task, tmp_path):
    from runner.models import RunLimits

    listing = {"type": "act", "action": "List Files", "input": {"dir_path": "."}}
    agent = AgentFactory(config={"script": [listing, listing, listing]})
    run = run_create(task=tiny_task.task, agent=agent, limits=RunLimits(max_steps=2), enqueue=False)
    run = run_execute(run.pk)
    assert (run.status, run.failure_kind, run.steps_count) == ("failed", "limit", 2)
    out = tmp_path / "limit.json"

    call_command("export_log", str(run.pk), str(out), "--format", "inspect")

    [sample] = read_eval_log(str(out)).samples
    assert (sample.limit.type, sample.limit.limit) == ("turn", 2) and sample.error is None


@pytest.mark.django_db(transaction=True)
def test_a_call_offering_functions_reads_back_with_them_and_the_calls_made(
    tiny_task_ready, endpoint, llm_server, tmp_path
):
    review = {"type": "function", "function": {"name": "submit_review", "parameters": {"type": "object"}}}
    call = {"id": "c1", "type": "function", "function": {"name": "submit_review", "arguments": '{"is_bug": false}'}}
    asked = [{"role": "user", "content": "review it"}]
    follow = [*asked, {"role": "assistant", "content": None, "tool_calls": [call]}]
    follow.append({"role": "tool", "tool_call_id": "c1", "content": "noted"})
    script = [
        {"type": "llm", "messages": asked, "tools": [review], "tool_choice": "required"},
        {"type": "llm", "messages": follow, "tools": [review]},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "reviewed"}},
    ]
    llm_server.script = [{"content": None, "tool_calls": [call]}, "Done."]
    agent = AgentFactory(name="reviewer", config={"script": script})
    run = run_execute(run_create(task=tiny_task_ready.task, agent=agent, model="test-model", enqueue=False).pk)
    out = str(tmp_path / "run.json")

    call_command("export_log", str(run.pk), out, "--format", "inspect")

    [sample] = read_eval_log(out).samples
    first, second = [e for e in sample.events if isinstance(e, ModelEvent)]
    assert [tool.name for tool in first.tools] == ["submit_review"] and first.tool_choice == "any"
    [made] = first.output.choices[0].message.tool_calls
    assert (made.id, made.function, made.arguments) == ("c1", "submit_review", {"is_bug": False})
    assert [m.role for m in second.input] == ["user", "assistant", "tool"]
    assert second.input[1].tool_calls[0].function == "submit_review" and second.input[2].tool_call_id == "c1"
    assert second.tool_choice == "auto" and second.output.completion == "Done."
