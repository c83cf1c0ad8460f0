"""Inspect AI eval logs brought in as self-reported runs: ours exported and imported again, one the library itself
wrote (``inspect_ai.log.write_eval_log``), and every bad log refused with one message and nothing written."""

from __future__ import annotations

import json
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from inspect_ai.event import ModelEvent, ToolEvent
from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSampleLimit, EvalSpec, write_eval_log
from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, GenerateConfig, ModelOutput, ModelUsage
from inspect_ai.scorer import Score
from inspect_ai.tool import ToolCall

from runner.logs import imports
from runner.logs.imports import NO_FILES, inspect_import
from runner.models import Agent, Run, Step
from tests.runner.logs.test_inspect_export import thinking_run

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
STEP_FIELDS = ("index", "action", "action_input", "entries", "observation", "low_level", "is_error")


@pytest.mark.django_db(transaction=True)
def test_a_run_exported_as_an_inspect_log_comes_back_with_its_steps_timing_and_usage(
    tiny_task_ready, endpoint, llm_server, tmp_path, capsys
):
    run = thinking_run(tiny_task_ready, llm_server)
    out = tmp_path / "run.json"
    call_command("export_log", str(run.pk), str(out), "--format", "inspect")

    call_command("import_log", str(out))

    again = Run.objects.exclude(pk=run.pk).get()
    assert "self-reported" in capsys.readouterr().out
    assert again.origin == Run.Origin.SELF_REPORTED and again.task_version == run.task_version
    assert (again.agent, again.model, again.status, again.final_answer) == (
        run.agent,
        run.model,
        "finished",
        run.final_answer,
    )
    left = list(Step.objects.filter(run=run).order_by("index").values(*STEP_FIELDS))
    right = list(Step.objects.filter(run=again).order_by("index").values(*STEP_FIELDS))
    assert left == right and len(left) == 4
    pairs = zip(
        Step.objects.filter(run=run).order_by("index"), Step.objects.filter(run=again).order_by("index"), strict=True
    )
    for ours, theirs in pairs:
        assert (theirs.started_at, theirs.tokens_in, theirs.cost) == (ours.started_at, ours.tokens_in, ours.cost)
        assert theirs.duration_s == pytest.approx(ours.duration_s, abs=1e-3)
    assert (again.tokens_in, again.tokens_out, again.cost) == (run.tokens_in, run.tokens_out, run.cost)
    assert again.wall_seconds == pytest.approx(run.wall_seconds)
    # Never scored from the log's word: it holds no files to score.
    assert again.final_score is None and again.eval_error.startswith(NO_FILES.split(";")[0])
    assert "the log reports a score of 5" in again.eval_error
    assert again.initial_snapshot == run.initial_snapshot


def _model_event(at: datetime, said: str, tokens: int) -> ModelEvent:
    output = ModelOutput(
        model="openai/gpt-4o",
        completion=said,
        usage=ModelUsage(input_tokens=tokens, output_tokens=7, total_tokens=tokens + 7),
    )
    return ModelEvent(
        timestamp=at,
        model="openai/gpt-4o",
        input=[ChatMessageUser(content="go")],
        tools=[],
        tool_choice="auto",
        config=GenerateConfig(),
        output=output,
    )


def _tool_event(at: datetime, call: str, function: str, arguments: dict, result: str, seconds: float) -> ToolEvent:
    return ToolEvent(
        timestamp=at,
        completed=at + timedelta(seconds=seconds),
        working_time=seconds,
        id=call,
        function=function,
        arguments=arguments,
        result=result,
    )


def their_sample(sample_id: int, problem: str, **fields) -> EvalSample:
    """A sample as an Inspect agent's eval leaves it: a model call, then a bash tool call, twice."""
    events = [
        _model_event(T0, "look around", 100),
        _tool_event(T0 + timedelta(seconds=2), "c1", "bash", {"cmd": "ls"}, "train.py\n", 1.5),
        _model_event(T0 + timedelta(seconds=5), "write it", 200),
        _tool_event(T0 + timedelta(seconds=8), "c2", "python", {"code": "open('value.txt','w').write('9')"}, "", 0.5),
    ]
    messages = [
        ChatMessageUser(content=problem),
        ChatMessageAssistant(
            content="Let me look around.", tool_calls=[ToolCall(id="c1", function="bash", arguments={"cmd": "ls"})]
        ),
    ]
    usage = {"openai/gpt-4o": ModelUsage(input_tokens=300, output_tokens=14, total_tokens=314, total_cost=0.25)}
    return EvalSample(
        id=sample_id,
        epoch=1,
        input=problem,
        target="",
        messages=messages,
        events=events,
        model_usage=usage,
        scores={"accuracy": Score(value=0.9)},
        total_time=12.0,
        working_time=11.0,
        **fields,
    )


def write_their_log(
    path: Path, samples: list[EvalSample], *, task: str = "mlab/value", model: str = "openai/gpt-4o"
) -> Path:
    log = EvalLog(
        status="success",
        eval=EvalSpec(
            created=T0.isoformat(),
            task=task,
            dataset=EvalDataset(name=task),
            model=model,
            config=EvalConfig(),
        ),
        samples=samples,
    )
    write_eval_log(log, str(path))
    return path


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", ["theirs.json", "theirs.eval"])  # JSON, and Inspect's own (default) zip format
def test_a_log_the_library_wrote_becomes_a_run_per_sample(tiny_task, tmp_path, name):
    problem = tiny_task.research_problem
    log = write_their_log(
        tmp_path / name,
        [
            their_sample(1, problem),
            their_sample(2, problem, error={"message": "sandbox died", "traceback": "", "traceback_ansi": ""}),
            their_sample(3, problem, limit=EvalSampleLimit(type="time", limit=10)),
        ],
    )

    # The log's task is not in the bank: found by the samples' research problem.
    call_command("import_log", str(log), "--agent", "their-agent")

    first, errored, limited = Run.objects.order_by("pk")
    assert first.task_version == tiny_task and first.model == "openai/gpt-4o" and first.agent.name == "their-agent"
    assert first.origin == Run.Origin.SELF_REPORTED and first.agent.kind == Agent.Kind.EXTERNAL
    steps = list(Step.objects.filter(run=first).order_by("index"))
    assert [(s.action, s.action_input, s.observation) for s in steps] == [
        ("bash", {"cmd": "ls"}, "train.py\n"),
        ("python", {"code": "open('value.txt','w').write('9')"}, ""),
    ]
    # A step runs from its tool call to its completion; the model calls before it are its tokens.
    assert steps[0].started_at == T0 + timedelta(seconds=2) and steps[0].duration_s == 1.5
    assert [s.tokens_in for s in steps] == [100, 200] and [s.tokens_out for s in steps] == [7, 7]
    assert steps[0].entries == {"Response": "Let me look around."}
    assert (first.tokens_in, first.tokens_out, float(first.cost), first.wall_seconds) == (300, 14, 0.25, 11.0)
    assert (first.status, first.final_score) == ("finished", None) and "score of 0.9" in first.eval_error
    assert (errored.status, errored.failure_kind, errored.error) == ("failed", "infrastructure", "sandbox died")
    assert (limited.status, limited.failure_kind) == ("timed_out", "limit")


@pytest.mark.django_db(transaction=True)
def test_a_sample_without_tool_calls_keeps_its_times_and_its_answer(tiny_task, tmp_path):
    sample = EvalSample(
        id=1, epoch=1, input=tiny_task.research_problem, target="",
        output=ModelOutput.from_content(model="openai/gpt-4o", content="The answer is 42."),
        started_at=T0.isoformat(), completed_at=(T0 + timedelta(seconds=7)).isoformat(), working_time=6.0,
    )  # fmt: skip
    call_command("import_log", str(write_their_log(tmp_path / "chat.eval", [sample])), "--agent", "their-agent")
    run = Run.objects.get()
    assert (run.steps_count, run.status, run.final_answer) == (0, "finished", "The answer is 42.")
    assert (run.started_at, run.finished_at, run.wall_seconds) == (T0, T0 + timedelta(seconds=7), 6.0)


@pytest.mark.django_db(transaction=True)
def test_a_log_of_an_eval_run_with_no_model_shows_none_not_none_slash_none(tiny_task, tmp_path):
    log = write_their_log(tmp_path / "nomodel.eval", [their_sample(1, tiny_task.research_problem)], model="none/none")
    call_command("import_log", str(log), "--agent", "their-agent")
    assert Run.objects.get().model == ""


def _their_log_json(tmp_path: Path, change=None, *, samples: int = 1) -> Path:
    """A log the library wrote, as JSON, changed by ``change`` (a function of the parsed document)."""
    path = write_their_log(tmp_path / "base.json", [their_sample(i, "Make value.txt larger.") for i in range(samples)])
    data = json.loads(path.read_text())
    if change is not None:
        change(data)
    out = tmp_path / "log.json"
    out.write_text(json.dumps(data))
    return out


def _text_file(name: str, text: str):
    def make(tmp_path: Path) -> Path:
        (tmp_path / name).write_text(text)
        return tmp_path / name

    return make


def _zip_file(name: str, members: dict[str, str]):
    def make(tmp_path: Path) -> Path:
        path = tmp_path / name
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for member, text in members.items():
                archive.writestr(member, text)
        return path

    return make


def _changed(change, **kwargs):
    return lambda tmp_path: _their_log_json(tmp_path, change, **kwargs)


def _first_tool(data: dict) -> dict:
    return next(e for e in data["samples"][0]["events"] if e["event"] == "tool")


BAD_LOGS = {
    "not JSON": (_text_file("log.json", "{not json"), "log.json does not parse as JSON"),
    "JSON that is not an Inspect log": (
        _text_file("log.json", '{"steps": []}'),
        "log.json is not an Inspect AI eval log \\(no version and eval\\); expected an Inspect AI eval log, in JSON",
    ),
    "an .eval that is no zip": (_text_file("log.eval", "PK"), "log.eval is not a readable zip"),
    "a zip that is no .eval log": (
        _zip_file("log.eval", {"notes.txt": "hello"}),
        "log.eval is a zip without header.json; expected an Inspect AI .eval log",
    ),
    "an .eval too large to read": (
        _zip_file("log.eval", {"header.json": "{}", "samples/1_epoch_1.json": " " * 200_000}),
        "the log is .* bytes; at most 100000 bytes are read \\(BENCH_TRACE_JSON_MAX_BYTES\\)",
    ),
    "a log too large to read": (
        _changed(lambda d: d["samples"][0].update(input="x" * 200_000)),
        "the log is .* bytes; at most 100000 bytes are read \\(BENCH_TRACE_JSON_MAX_BYTES\\)",
    ),
    "a log nested too deeply": (
        _text_file("log.json", '{"version": 2, "eval": {}, "samples": ' + "[" * 20_000 + "]" * 20_000 + "}"),
        "log.json nests lists or objects too deeply to be read",
    ),
    "a log without samples": (_changed(lambda d: d.update(samples=[])), "holds no samples; expected at least one"),
    "more samples than one import makes runs": (
        _changed(None, samples=4),
        "holds 4 samples; at most 3 are imported at once \\(BENCH_MAX_RUNS_PER_REQUEST\\)",
    ),
    "a task neither named nor matched": (
        _changed(lambda d: d["samples"][0].update(input="another problem")),
        "the log's task 'mlab/value' is not in the bank and its research problem is not that of exactly one task",
    ),
    "a tool event without a time": (
        _changed(lambda d: _first_tool(d).pop("timestamp")),
        "sample 0: event 1 \\(a tool event\\) has no timestamp",
    ),
    "a tool event dated past the year 9999": (
        _changed(lambda d: _first_tool(d).update(completed="10000-01-01T00:00:00+00:00")),
        "completed is '10000-01-01T00:00:00\\+00:00'; expected a date and time",
    ),
    "negative tokens": (
        _changed(lambda d: d["samples"][0]["model_usage"]["openai/gpt-4o"].update(input_tokens=-5)),
        "sample 0's input_tokens is '-5'; expected a number from 0 to",
    ),
    "tool events out of order": (
        _changed(lambda d: _first_tool(d).update(completed="2026-05-01T13:00:00+00:00")),
        "sample 0: event 3 completed before the tool event before it: out of order",
    ),
    "a run record with a negative cost": (
        _changed(
            lambda d: d["samples"][0]["metadata"].update(
                mlab_bench={"format": "mlab-bench run log 1", "usage": {"cost": -1}}
            )
        ),
        "usage.cost is '-1'; expected a number from 0",
    ),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", list(BAD_LOGS))
def test_a_bad_inspect_log_gets_one_clear_error_and_leaves_nothing(case, tiny_task, tmp_path, settings):
    settings.BENCH_TRACE_JSON_MAX_BYTES = 100_000
    settings.BENCH_MAX_RUNS_PER_REQUEST = 3
    make, message = BAD_LOGS[case]
    source = make(tmp_path)
    agents = Agent.objects.count()

    with pytest.raises(CommandError, match=message) as caught:
        call_command("import_log", str(source), "--agent", "theirs")

    assert len(str(caught.value).splitlines()) == 1
    assert not Run.objects.exists() and not Step.objects.exists() and Agent.objects.count() == agents


@pytest.mark.django_db(transaction=True)
def test_a_task_named_that_the_bank_does_not_have_is_refused(tiny_task, tmp_path):
    with pytest.raises(CommandError, match="no task 'nope' in the bank; tasks: tiny"):
        call_command("import_log", str(_their_log_json(tmp_path)), "--task", "nope")
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_runs_of_a_log_are_written_all_or_none(tiny_task, tmp_path, monkeypatch):
    """A failure while the second sample's run is written takes the first one's back too."""
    log = write_their_log(tmp_path / "two.json", [their_sample(i, tiny_task.research_problem) for i in (1, 2)])
    written = []

    def tags_then_fail(run):
        written.append(run.pk)
        if len(written) == 2:
            raise RuntimeError("the database went away")

    monkeypatch.setattr(imports, "tags_auto", tags_then_fail)

    with pytest.raises(RuntimeError, match="went away"):
        inspect_import(source=log)

    assert len(written) == 2 and not Run.objects.exists() and not Step.objects.exists()
