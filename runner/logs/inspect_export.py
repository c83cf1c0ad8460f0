"""Runs as an Inspect AI eval log: the JSON document ``inspect_ai.log.write_eval_log`` writes to a name ending in
``.json``, which ``inspect view`` opens and ``inspect_ai.log.read_eval_log`` reads. One sample per run:

    eval        the task (one task: its slug, version and title; several: the batch), the agent as the solver,
                the model, the run's limits as the eval's config
    samples[]   id: the run's id, epoch 1; input: the task's research problem; messages: the problem, then for
                each step the agent's reply (its entries, else its model's last completion) calling the step's
                action as a tool, and the observation as the tool's answer; events: each model call (prompt,
                completion, usage, latency) and each step (a tool event: action, input, observation, timing);
                output: the final answer; scores["mlab_bench"]: the final score, the baseline it was measured
                against, the improvement and success in its metadata; model_usage, total_time (clock time) and
                working_time (the run's wall time, time off a worker not counted); error or limit for a run
                that did not finish; metadata["mlab_bench"]: the run record ``mlab_bench.json`` holds
                (``exports.run_log_extras``)
    results     the mean final score, mean improvement and success rate of the scored runs
    stats       when the first run started and the last ended, tokens and cost per model

Why ``.json`` and not ``.eval`` (Inspect's zip of header, one file per sample and summaries): a ``.json`` log is
one document that ``read_eval_log`` validates whole against the library's own models, and ``inspect view`` lists
and opens both kinds; writing the zip by hand means keeping its journal and summary files in step with each
library release, for no gain at a run's size. ``docs/inspect.md`` says what maps to what and what is lost.

The platform does not import ``inspect_ai``: it writes the document itself, and the tests read every log it
writes with the library (``tests/runner/logs/test_inspect_export.py``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

from django.db.models import Avg, Count, Max, Min, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, NullIf

from ..models import LLMCall, Run, Step, error_summary
from .exports import EXTRAS_FORMAT, run_log_extras

#: The version of Inspect's log format written (``EvalLog.version``).
LOG_VERSION = 2
#: The name of the score every sample carries: the platform's own scoring of the final workspace.
SCORER = "mlab_bench"
#: Where a sample's and the log's platform fields live in ``metadata``.
METADATA_KEY = "mlab_bench"
#: Inspect's model name for a run that names none.
NO_MODEL = "none/none"


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def message_text(content: object) -> str:
    """A chat message's or tool result's content as text: a string, the text of a list of parts (OpenAI's or
    Inspect's), else its ``str`` (a number); written here, read back by ``inspect_read``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _chat_message(message: object) -> dict:
    """One message of a model call's prompt (OpenAI's shape) as Inspect's chat message."""
    if not isinstance(message, dict):
        return {"role": "user", "content": message_text(message)}
    role = message.get("role")
    content = message_text(message.get("content"))
    if role == "tool":
        return {"role": "tool", "content": content, "tool_call_id": str(message.get("tool_call_id") or "")}
    said = {"role": role if role in ("system", "user", "assistant") else "user", "content": content}
    calls = [_inspect_call(call) for call in message.get("tool_calls") or [] if isinstance(call, dict)]
    return said | ({"tool_calls": calls} if role == "assistant" and calls else {})


def _inspect_call(call: dict) -> dict:
    """A function call of OpenAI's shape (its arguments JSON text) as Inspect's tool call (its arguments a dict)."""
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = None
    shown = {"id": str(call.get("id", "")), "function": str(function.get("name", "")), "type": "function"}
    if isinstance(arguments, dict):
        return shown | {"arguments": arguments}
    return shown | {"arguments": {}, "parse_error": f"arguments are not a JSON object: {function.get('arguments')!r}"}


def _inspect_tools(offered: object) -> tuple[list[dict], object]:
    """The functions a call offered (its row's ``tools``: OpenAI's ``tools`` and ``tool_choice``) as Inspect's
    tool infos and tool choice."""
    offered = offered if isinstance(offered, dict) else {}
    infos = []
    for tool in offered.get("tools") or []:
        function = tool.get("function", {}) if isinstance(tool, dict) else {}
        infos.append(
            {
                "name": str(function.get("name", "")),
                "description": str(function.get("description", "")),
                "parameters": function.get("parameters") or {"type": "object", "properties": {}},
            }
        )
    choice = offered.get("tool_choice", "auto" if infos else "none")
    if isinstance(choice, dict):
        choice = {"name": str((choice.get("function") or {}).get("name", ""))}
    elif choice == "required":
        choice = "any"
    return infos, choice


def _usage(tokens_in: int, tokens_out: int, cost: object) -> dict:
    return {
        "input_tokens": int(tokens_in or 0),
        "output_tokens": int(tokens_out or 0),
        "total_tokens": int(tokens_in or 0) + int(tokens_out or 0),
        "total_cost": float(cost or 0),
    }


def _assistant(content: str, model: str, calls: list[dict] | None = None) -> dict:
    message = {"role": "assistant", "content": content, "source": "generate", "model": model}
    if calls:
        message["tool_calls"] = calls
    return message


def _seconds_into(run: Run, moment: datetime) -> float:
    return max((moment - run.started_at).total_seconds(), 0.0) if run.started_at is not None else 0.0


def _model_event(run: Run, call: LLMCall) -> dict:
    """A model call as Inspect's model event: the prompt, the completion, its usage and latency."""
    began = call.created_at - timedelta(seconds=call.latency_s)  # the record is written when the call returns
    model = call.endpoint or call.model or NO_MODEL  # the name the run gave, as Inspect's model
    calls = [_inspect_call(made) for made in call.tool_calls or [] if isinstance(made, dict)]
    stop = "tool_calls" if calls else "stop"
    tools, tool_choice = _inspect_tools(call.tools)
    output = {
        "model": model,
        "choices": [{"message": _assistant(call.completion, model, calls), "stop_reason": stop}],
        "completion": call.completion,
        "usage": _usage(call.tokens_in, call.tokens_out, call.cost),
        "time": call.latency_s,
    }
    if call.error:
        output["error"] = call.error
    event = {
        "event": "model",
        "timestamp": _iso(began),
        "completed": _iso(call.created_at),
        "working_start": _seconds_into(run, began),
        "working_time": call.latency_s,
        "model": model,
        "input": [_chat_message(m) for m in (call.messages if isinstance(call.messages, list) else [])],
        "tools": tools,
        "tool_choice": tool_choice,
        "config": {},
        "output": output,
        "metadata": {"purpose": call.purpose, "model_id": call.model, "step": call.step_index},
    }
    if call.error:
        event["error"] = call.error
    return event


def _arguments(step: Step) -> dict:
    """A tool call's arguments are an object; a step whose input is not one (a log's) is given as ``input``."""
    return step.action_input if isinstance(step.action_input, dict) else {"input": step.action_input}


def _tool_event(run: Run, step: Step) -> dict:
    """A step as Inspect's tool event: the action, its input, the observation, when it ran."""
    ended = step.started_at + timedelta(seconds=step.duration_s)
    event = {
        "event": "tool",
        "type": "function",
        "id": f"step-{step.index}",
        "function": step.action,
        "arguments": _arguments(step),
        "result": step.observation,
        "timestamp": _iso(step.started_at),
        "completed": _iso(ended),
        "working_start": _seconds_into(run, step.started_at),
        "working_time": step.duration_s,
        "events": [],
        "metadata": {
            "step": step.index,
            "entries": step.entries,
            "low_level": step.low_level,
            **({"action_input": step.action_input} if not isinstance(step.action_input, dict) else {}),
        },
    }
    if step.is_error:
        event["error"] = _tool_error(step)
    return event


def _tool_error(step: Step) -> dict:
    return {"type": "unknown", "message": error_summary(step.observation) or "the action failed"}


def _reply(step: Step, calls: list[LLMCall]) -> str:
    """What the agent said when it chose the step's action: its entries, else its model's last completion."""
    if step.entries:
        return "\n".join(f"{name}: {value}" for name, value in step.entries.items())
    return calls[-1].completion if calls else ""


def _conversation(run: Run, steps: list[Step], calls: dict[int, list[LLMCall]]) -> tuple[list[dict], list[dict]]:
    """The sample's messages and events, step by step: the model calls made for a step, then the step."""
    model = run.model or NO_MODEL
    messages: list[dict] = [{"role": "user", "content": run.task_version.research_problem, "source": "input"}]
    events: list[dict] = []
    for step in steps:
        made = calls.get(step.index, [])
        events.extend(_model_event(run, call) for call in made)
        events.append(_tool_event(run, step))
        call_id = f"step-{step.index}"
        tool_call = {"id": call_id, "function": step.action, "arguments": _arguments(step), "type": "function"}
        messages.append(_assistant(_reply(step, made), model, [tool_call]))
        answer = {"role": "tool", "content": step.observation, "tool_call_id": call_id, "function": step.action}
        if step.is_error:
            answer["error"] = _tool_error(step)
        messages.append(answer)
    indexes = {step.index for step in steps}
    trailing = [call for index, made in calls.items() if index not in indexes for call in made]
    events.extend(_model_event(run, call) for call in trailing)  # calls after the last step (none, usually)
    return messages, events


def _score(run: Run) -> dict | None:
    """The final score as Inspect's score, the baseline it is measured against in its metadata; None unscored."""
    if run.final_score is None:
        return None
    version = run.task_version
    baseline = run.paired_baseline if run.paired_baseline is not None else version.baseline_score
    explanation = f"final score {run.final_score:.6g}"
    if baseline is not None:
        explanation += f" against the baseline {baseline:.6g}"
    if run.improvement is not None:
        explanation += f": {run.improvement:+.1%} ({'better' if version.higher_is_better else 'lower'} is better)"
    return {
        "value": run.final_score,
        "answer": run.final_answer,
        "explanation": explanation,
        "metadata": {
            "baseline": baseline,
            "paired_baseline": run.paired_baseline is not None,
            "improvement": run.improvement,
            "succeeded": run.succeeded,
            "higher_is_better": version.higher_is_better,
        },
        "history": [],
    }


def _ending(run: Run) -> dict:
    """How a run that did not finish ended: a limit it reached, or an error."""
    if run.status == Run.Status.TIMED_OUT:
        return {"limit": {"type": "time", "limit": float(run.max_time_s), "reason": error_summary(run.error)}}
    if run.failure_kind == Run.FailureKind.LIMIT:
        return {"limit": {**_limit_reached(run), "reason": error_summary(run.error)}}
    if run.status in (Run.Status.FAILED, Run.Status.CANCELLED):
        message = error_summary(run.error) or f"the run {run.status}"
        return {"error": {"message": message, "traceback": run.error, "traceback_ansi": run.error}}
    return {}


def _limit_reached(run: Run) -> dict:
    """Which of Inspect's limits a run ended at: its steps (Inspect's turns), its token or cost budget, else
    another (a storage limit: ``custom``)."""
    error = run.error.lower()
    if run.error.startswith(Run.STEP_LIMIT_ERROR):
        return {"type": "turn", "limit": float(run.max_steps)}
    if "cost" in error and run.max_cost is not None:
        return {"type": "cost", "limit": float(run.max_cost)}
    if "token" in error and run.max_tokens:
        return {"type": "token", "limit": float(run.max_tokens)}
    return {"type": "custom", "limit": 0.0}


def _usage_by_model(calls: QuerySet[LLMCall]) -> dict:
    """Tokens and cost per model (the endpoint's name, as the run names it), summed in the database."""
    rows = (
        calls.annotate(name=Coalesce(NullIf("endpoint", Value("")), "model"))
        .values("name")
        .annotate(tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"), cost=Sum("cost"))
        .order_by("name")
    )
    return {row["name"] or NO_MODEL: _usage(row["tokens_in"], row["tokens_out"], row["cost"]) for row in rows}


def _model_usage(run: Run) -> dict:
    """Tokens and cost per model, summed in the database; a run with no recorded call has its own totals."""
    usage = _usage_by_model(LLMCall.objects.filter(run=run))
    if not usage and (run.tokens_in or run.tokens_out):
        usage[run.model or NO_MODEL] = _usage(run.tokens_in, run.tokens_out, run.cost)
    return usage


def inspect_sample(*, run: Run) -> dict:
    """One run as an Inspect sample."""
    steps = list(Step.objects.filter(run=run).order_by("index"))
    calls: dict[int, list[LLMCall]] = {}
    for call in LLMCall.objects.filter(run=run).order_by("created_at", "pk"):
        calls.setdefault(call.step_index, []).append(call)
    messages, events = _conversation(run, steps, calls)
    model = run.model or NO_MODEL
    answer = run.final_answer
    sample = {
        "id": run.pk,
        "epoch": 1,
        "input": run.task_version.research_problem,
        "target": "",
        "messages": messages,
        "output": {
            "model": model,
            "choices": [{"message": _assistant(answer, model), "stop_reason": "stop"}] if answer else [],
            "completion": answer,
        },
        "metadata": {METADATA_KEY: run_log_extras(run=run)},
        "store": {},
        "events": events,
        "model_usage": _model_usage(run),
        "total_time": (run.finished_at - run.started_at).total_seconds()
        if run.started_at and run.finished_at
        else None,
        "working_time": run.elapsed_seconds,
        "started_at": _iso(run.started_at),
        "completed_at": _iso(run.finished_at),
        "attachments": {},
        **_ending(run),
    }
    if (score := _score(run)) is not None:
        sample["scores"] = {SCORER: score}
    return sample


def _header(runs: QuerySet[Run], *, name: str, batch: int | None) -> dict:
    """The eval log's header: what the runs are of, and their results and usage summed in the database."""
    first = runs.select_related("task", "task_version", "agent").order_by("pk").first()
    facts = runs.aggregate(
        n=Count("pk"),
        ended=Count("pk", filter=Q(status__in=Run.ENDED)),
        tasks=Count("task_version", distinct=True),
        models=Count("model", distinct=True),
        agents=Count("agent", distinct=True),
        scored=Count("pk", filter=Q(final_score__isnull=False)),
        mean_score=Avg("final_score"),
        mean_improvement=Avg("improvement"),
        succeeded=Count("pk", filter=Q(final_score__isnull=False, succeeded=True)),
        created=Min("created_at"),
        started=Min("started_at"),
        completed=Max("finished_at"),
    )
    facts["success_rate"] = facts["succeeded"] / facts["scored"] if facts["scored"] else None
    one_task = facts["tasks"] == 1
    version = first.task_version
    metrics = {
        key: {"name": key, "value": facts[field], "params": {}}
        for key, field in (("mean", "mean_score"), ("improvement", "mean_improvement"), ("success", "success_rate"))
        if facts[field] is not None
    }
    config = {}
    if first.max_time_s:
        config["time_limit"] = first.max_time_s
    if first.max_tokens:
        config["token_limit"] = first.max_tokens
    if first.max_cost is not None:
        config["cost_limit"] = float(first.max_cost)
    pks = list(runs.order_by("pk").values_list("pk", flat=True))
    return {
        "version": LOG_VERSION,
        "status": "success" if facts["ended"] == facts["n"] else "started",
        "eval": {
            "eval_id": name,
            "run_id": name,
            "created": _iso(facts["created"]),
            "task": first.task.slug if one_task else f"mlab-bench-{name}",
            "task_id": name,
            "task_version": version.number if one_task else 0,
            "task_display_name": first.task.title if one_task else None,
            "task_attribs": {},
            "task_args": {},
            "dataset": {"name": first.task.slug if one_task else name, "samples": facts["n"], "sample_ids": pks},
            "solver": f"{first.agent.name}@{first.agent.version}" if facts["agents"] == 1 else None,
            "model": (first.model or NO_MODEL) if facts["models"] == 1 else "mixed/models",
            "config": config,
            "packages": {"mlab-bench": "0.1.0"},
            "scorers": [{"name": SCORER, "options": {}, "metrics": [], "metadata": {}}],
            "metadata": {METADATA_KEY: {"format": EXTRAS_FORMAT, "runs": pks, "batch": batch}},
        },
        "plan": {"name": "plan", "steps": [{"solver": first.agent.name, "params": {}}], "config": {}},
        "results": {
            "total_samples": facts["n"],
            "completed_samples": facts["ended"],
            "scores": [{"name": SCORER, "scorer": SCORER, "params": {}, "metrics": metrics}] if metrics else [],
        },
        "stats": {
            "started_at": _iso(facts["started"]) or "",
            "completed_at": _iso(facts["completed"]) or "",
            "model_usage": _usage_by_model(LLMCall.objects.filter(run__in=runs)),
        },
        "invalidated": False,
        "tags": [],
        "metadata": {},
    }


def inspect_log_write(*, runs: QuerySet[Run], out: IO[str], name: str, batch: int | None = None) -> int:
    """Write ``runs`` (at least one) as one Inspect eval log to ``out``, a sample at a time; returns the number of
    samples."""
    header = json.dumps(_header(runs, name=name, batch=batch))
    out.write(header[:-1] + ', "samples": [')
    count = 0
    for run in _each(runs):
        out.write((", " if count else "") + json.dumps(inspect_sample(run=run)))
        count += 1
    out.write("]}")
    return count


def _each(runs: QuerySet[Run]) -> Iterable[Run]:
    return runs.select_related("task", "task_version", "agent").order_by("pk").iterator(chunk_size=50)


def inspect_log_name(*, run: Run | None = None, batch: int | None = None) -> str:
    """The log's id: ``mlab-bench-run-<id>`` or ``mlab-bench-batch-<id>``."""
    return f"mlab-bench-run-{run.pk}" if run is not None else f"mlab-bench-batch-{batch}"


def inspect_log_filename(*, runs: QuerySet[Run], name: str) -> str:
    """The log's file name as Inspect names its own, ``<created>_<task>_<id>.json``: ``inspect view`` and
    ``list_eval_logs`` list a ``.json`` log only when its name starts with that timestamp."""
    facts = runs.aggregate(created=Min("created_at"), tasks=Count("task", distinct=True), task=Min("task__slug"))
    created = facts["created"].astimezone(UTC).strftime("%Y-%m-%dT%H-%M-%S+00-00")
    task = facts["task"] if facts["tasks"] == 1 else "mlab-bench"
    return f"{created}_{task.replace('_', '-')}_{name.replace('mlab-bench-', '').replace('-', '')}.json"


def inspect_log_file(*, runs: QuerySet[Run], name: str, batch: int | None = None) -> Path:
    """``inspect_log_write`` into a new temporary ``.json`` file, which the caller removes."""
    fd, path_name = tempfile.mkstemp(prefix=f"{name}-", suffix=".json")
    path = Path(path_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            inspect_log_write(runs=runs, out=out, name=name, batch=batch)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path
