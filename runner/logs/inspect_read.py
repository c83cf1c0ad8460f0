"""An Inspect AI eval log read and checked (``inspect_log_read``), before anything is written: one ``read.Log`` per
sample, as an MLAgentBench log is read, so that ``imports.inspect_import`` records each as ``log_import`` records
one. The checks and limits are the MLAgentBench log's (``read.py``): the file's size
(``BENCH_TRACE_JSON_MAX_BYTES``), how deep it nests, the steps of a sample (``MAX_STEPS``), every number in the
range its field holds, and the samples of one log at most ``BENCH_MAX_RUNS_PER_REQUEST``, the runs one request may
make. Whatever is wrong is one ``LogImportError`` naming it.

A sample's steps are its tool events, in order (``inspect_export`` writes a step as one): the action is the tool's
name, its input the arguments, its observation the result, and the step ends when the tool completed. The model
events before a step are the calls made for it: their tokens and cost are the step's. A sample this platform
exported carries its run record in ``metadata["mlab_bench"]`` (``exports.run_log_extras``): the run's status, agent,
model, usage and each step's timing as they were recorded.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from datetime import datetime
from pathlib import Path

from django.conf import settings

from .exports import EXTRAS_FORMAT
from .inspect_export import METADATA_KEY, message_text
from .read import (
    LATEST_TIMESTAMP,
    MAX_STEPS,
    USAGE_BOUNDS,
    Log,
    LoggedStep,
    LogImportError,
    _bounded,
    _extras_check,
    _json_parse,
    log_number,
)

EXPECTED_INSPECT = "an Inspect AI eval log, in JSON (.json) or in its zip format (.eval)"
#: Inspect's own log format, a zip of JSON documents (its default).
EVAL_SUFFIX = ".eval"


#: The names of Inspect log files: JSON, and Inspect's own zipped format.
INSPECT_SUFFIXES = (".json", EVAL_SUFFIX)


def is_inspect_name(name: str) -> bool:
    """Whether a file named ``name`` is meant as an Inspect log, not an MLAgentBench log's zip."""
    return Path(name).suffix.lower() in INSPECT_SUFFIXES


def is_inspect_log(path: Path) -> bool:
    """Whether ``path`` is meant as an Inspect log (a ``.json`` or ``.eval`` file), not an MLAgentBench one."""
    return path.is_file() and is_inspect_name(path.name)


def _when(value: object, where: str) -> float | None:
    """An Inspect timestamp (ISO 8601 with its zone) as seconds since the epoch; None when there is none."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        raise LogImportError(f"{where} is {str(value)[:40]!r}; expected a date and time (ISO 8601)") from None
    if moment.tzinfo is None:
        raise LogImportError(f"{where} is {str(value)[:40]!r}; expected a date and time with its zone")
    return _bounded(moment.timestamp(), where, high=LATEST_TIMESTAMP)


def _object(value: object, where: str) -> dict:
    if not isinstance(value, dict):
        raise LogImportError(f"{where} is not an object; expected {EXPECTED_INSPECT}")
    return value


def _replies(sample: dict) -> dict[str, str]:
    """What the agent said when it called each tool: its assistant message's text, by the tool call's id."""
    replies = {}
    for message in sample.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    replies[call["id"]] = message_text(message.get("content"))
    return replies


def _usage_of(event: dict, where: str) -> dict:
    """A model event's tokens and cost (its output's usage)."""
    output = event.get("output") if isinstance(event.get("output"), dict) else {}
    usage = output.get("usage") if isinstance(output.get("usage"), dict) else {}
    return {
        "tokens_in": _bounded(usage.get("input_tokens"), f"{where}'s input_tokens", high=USAGE_BOUNDS["tokens_in"])
        or 0,
        "tokens_out": _bounded(usage.get("output_tokens"), f"{where}'s output_tokens", high=USAGE_BOUNDS["tokens_out"])
        or 0,
        "cost": _bounded(usage.get("total_cost"), f"{where}'s total_cost", high=USAGE_BOUNDS["cost"]) or 0,
    }


def _step(event: dict, where: str, replies: dict[str, str]) -> tuple[LoggedStep, float]:
    """A tool event as a step, and when it started."""
    name = event.get("function")
    if not isinstance(name, str) or not name:
        raise LogImportError(f"{where} has no function name; expected a tool event (function, arguments, result)")
    metadata = event.get("metadata") if isinstance(event.get("metadata"), dict) else {}
    began = _when(event.get("timestamp"), f"{where}'s timestamp")
    if began is None:
        raise LogImportError(f"{where} has no timestamp")
    ended = _when(event.get("completed"), f"{where}'s completed")
    if ended is None:
        working = _bounded(event.get("working_time"), f"{where}'s working_time", high=USAGE_BOUNDS["wall_seconds"])
        ended = min(began + (working or 0), LATEST_TIMESTAMP)
    args = metadata["action_input"] if "action_input" in metadata else event.get("arguments", {})
    entries = metadata.get("entries")
    if not isinstance(entries, dict):
        reply = replies.get(str(event.get("id")), "")
        entries = {"Response": reply} if reply else {}
    low_level = metadata.get("low_level") if isinstance(metadata.get("low_level"), list) else []
    step = LoggedStep(
        action=name[:100],
        args=args,
        observation=message_text(event.get("result")),
        timestamp=max(ended, began),
        entries={str(k)[:100]: str(v) for k, v in entries.items()},
        low_level=[low for low in low_level if isinstance(low, dict)],
    )
    return step, began


def _ending(sample: dict) -> dict:
    """How a sample from elsewhere ended, as a run's status: an error is a failure that is not the agent's to
    answer for (MLAgentBench's error.txt is read the same way), a limit a failure at a limit (the time limit: timed
    out), else finished."""
    if sample.get("error"):
        error = sample["error"] if isinstance(sample["error"], dict) else {}
        return {"status": "failed", "failure_kind": "infrastructure", "error": str(error.get("message") or "error")}
    if isinstance(sample.get("limit"), dict):
        limit = sample["limit"]
        kind = str(limit.get("type"))
        status = "timed_out" if kind in ("time", "working") else "failed"
        return {"status": status, "failure_kind": "limit", "error": f"the sample reached its {kind} limit"}
    return {"status": "finished", "failure_kind": "", "error": ""}


def _sample_log(sample: dict, where: str, header: dict) -> Log:
    events = sample.get("events") or []
    if not isinstance(events, list):
        raise LogImportError(f"{where}'s events is not a list")
    replies = _replies(sample)
    steps, timing, pending = [], [], {"tokens_in": 0, "tokens_out": 0, "cost": 0.0}
    for n, event in enumerate(events):
        if not isinstance(event, dict):
            raise LogImportError(f"{where}: event {n} is not an object")
        if event.get("event") == "model":
            for key, value in _usage_of(event, f"{where}: event {n}").items():
                pending[key] += value
        elif event.get("event") == "tool":
            if len(steps) == MAX_STEPS:
                raise LogImportError(f"{where} has more than {MAX_STEPS} tool events; at most {MAX_STEPS} are imported")
            step, began = _step(event, f"{where}: event {n} (a tool event)", replies)
            if steps and step.timestamp < steps[-1].timestamp:
                raise LogImportError(f"{where}: event {n} completed before the tool event before it: out of order")
            steps.append(step)
            timing.append({"index": len(timing), "started_at": began, "duration_s": step.timestamp - began, **pending})
            pending = {"tokens_in": 0, "tokens_out": 0, "cost": 0.0}
    metadata = sample.get("metadata") if isinstance(sample.get("metadata"), dict) else {}
    record = metadata.get(METADATA_KEY)
    if isinstance(record, dict) and record.get("format") == EXTRAS_FORMAT:
        _extras_check(record)  # a run this platform exported: its record as it was
        extras = record
    else:
        extras = {
            "format": EXTRAS_FORMAT,
            "task": header.get("task"),
            "model": inspect_model(header),
            "steps": timing,
            "usage": _sample_usage(sample, where),
            "final_score": _reported_score(sample),
            # A sample with no tool call has no step to carry its times or its answer: the run takes the sample's.
            "started_at": _when(sample.get("started_at"), f"{where}'s started_at"),
            "completed_at": _when(sample.get("completed_at"), f"{where}'s completed_at"),
            "answer": _answer(sample),
            **_ending(sample),
        }
    total = sample.get("working_time", sample.get("total_time"))
    wall = _bounded(total, f"{where}'s working_time", high=USAGE_BOUNDS["wall_seconds"])
    if extras is record and not sample.get("completed_at"):
        wall = None  # a run exported before it ended: it did not end, as a log without overall_time.txt
    return Log(
        env_log=Path(),
        steps=steps,
        task_description=message_text(sample.get("input")),
        step_dirs={},
        final_dir=None,
        overall_time=wall,
        error=None,
        extras=extras,
    )


def _answer(sample: dict) -> str:
    """What the sample's model answered last (its output's completion, else its first choice's text)."""
    output = sample.get("output") if isinstance(sample.get("output"), dict) else {}
    if isinstance(output.get("completion"), str) and output["completion"]:
        return output["completion"]
    choices = output.get("choices") if isinstance(output.get("choices"), list) else []
    message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
    return message_text(message.get("content")) if isinstance(message, dict) else ""


#: The model name Inspect records when a task ran with none.
NO_MODEL = "none/none"


def inspect_model(header: dict) -> str:
    """The model the eval ran with ("" when it ran with none: Inspect writes none/none)."""
    model = str(header.get("model") or "")
    return "" if model == NO_MODEL else model


def _reported_score(sample: dict) -> float | None:
    """The first number the sample's scorers gave (what the log reports; the run is never ranked by it)."""
    scores = sample.get("scores") if isinstance(sample.get("scores"), dict) else {}
    for score in scores.values():
        if isinstance(score, dict) and (value := log_number(score.get("value"))) is not None:
            return value
    return None


def _sample_usage(sample: dict, where: str) -> dict:
    """A sample's tokens and cost over all its models, and its time."""
    usage = {"tokens_in": 0.0, "tokens_out": 0.0, "cost": 0.0}
    models = sample.get("model_usage") if isinstance(sample.get("model_usage"), dict) else {}
    for name, used in models.items():
        if not isinstance(used, dict):
            raise LogImportError(f"{where}'s model_usage[{str(name)[:40]!r}] is not an object")
        for key, field in (("tokens_in", "input_tokens"), ("tokens_out", "output_tokens"), ("cost", "total_cost")):
            usage[key] += _bounded(used.get(field), f"{where}'s {field}", high=USAGE_BOUNDS[key]) or 0
    for key, high in USAGE_BOUNDS.items():
        if key in usage and usage[key] > high:
            raise LogImportError(f"{where}'s {key} adds up to {usage[key]:g}; at most {high:g}")
    usage["wall_seconds"] = log_number(sample.get("working_time"))
    return usage


def _too_big(size: int) -> LogImportError:
    return LogImportError(
        f"the log is {size} bytes; at most {settings.BENCH_TRACE_JSON_MAX_BYTES} bytes are read "
        "(BENCH_TRACE_JSON_MAX_BYTES)"
    )


def _json_log_read(path: Path) -> object:
    size = path.stat().st_size
    if size > settings.BENCH_TRACE_JSON_MAX_BYTES:
        raise _too_big(size)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise LogImportError(f"the log is not UTF-8 text; expected {EXPECTED_INSPECT}") from None
    return _json_parse(text, path.name)


#: What an Inspect .eval log (a zip) holds that is read: its header and its samples, one JSON document each.
EVAL_HEADER = "header.json"
EVAL_SAMPLES = re.compile(r"samples/(.+)_epoch_(\d+)\.json")
EVAL_MAX_MEMBERS = 100_000


def _eval_zip_read(path: Path) -> dict:
    """An Inspect log in its .eval format (a zip of JSON documents: header.json, samples/<id>_epoch_<n>.json) as
    the JSON format holds it: the header's fields and ``samples``. Read within BENCH_TRACE_JSON_MAX_BYTES,
    unpacked, without inspect_ai."""
    limit = settings.BENCH_TRACE_JSON_MAX_BYTES
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > EVAL_MAX_MEMBERS:
                raise LogImportError(f"{path.name} holds {len(members)} files; at most {EVAL_MAX_MEMBERS} are read")
            if (size := sum(member.file_size for member in members)) > limit:
                raise _too_big(size)
            names = {member.filename for member in members}
            if EVAL_HEADER not in names:
                raise LogImportError(f"{path.name} is a zip without {EVAL_HEADER}; expected an Inspect AI .eval log")
            read = 0

            def document(name: str) -> object:
                nonlocal read
                with archive.open(name) as member:
                    data = member.read(limit - read + 1)
                read += len(data)
                if read > limit:
                    raise _too_big(read)
                try:
                    return _json_parse(data.decode("utf-8"), f"{path.name}: {name}")
                except UnicodeDecodeError:
                    raise LogImportError(f"{path.name}: {name} is not UTF-8 text") from None

            header = document(EVAL_HEADER)
            if not isinstance(header, dict):
                raise LogImportError(f"{path.name}: {EVAL_HEADER} is not an object")
            found = [(m, name) for name in names if (m := EVAL_SAMPLES.fullmatch(name))]
            ordered = sorted(found, key=lambda item: (int(item[0][2]), _natural(item[0][1])))
            return {**header, "samples": [document(name) for _, name in ordered]}
    except (zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise LogImportError(f"{path.name} is not a readable zip ({exc}); an Inspect AI .eval log is one") from None


def _natural(sample_id: str) -> tuple:
    """Sample ids in their order: 2 before 10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", sample_id))


def inspect_log_read(path: Path) -> tuple[dict, list[Log]]:
    """Read and check an Inspect log file: its eval header and one ``Log`` per sample (``LogImportError`` on
    anything wrong)."""
    data = _eval_zip_read(path) if path.suffix.lower() == EVAL_SUFFIX else _json_log_read(path)
    if not isinstance(data, dict) or not isinstance(data.get("eval"), dict) or "version" not in data:
        raise LogImportError(
            f"{path.name} is not an Inspect AI eval log (no version and eval); expected {EXPECTED_INSPECT}"
        )
    header = data["eval"]
    samples = data.get("samples")
    if not isinstance(samples, list) or not samples:
        raise LogImportError(f"{path.name} holds no samples; expected at least one (a log written with log_samples on)")
    most = settings.BENCH_MAX_RUNS_PER_REQUEST
    if len(samples) > most:
        raise LogImportError(
            f"{path.name} holds {len(samples)} samples; at most {most} are imported at once "
            "(BENCH_MAX_RUNS_PER_REQUEST)"
        )
    logs = [_sample_log(_object(s, f"sample {i}"), f"sample {i}", header) for i, s in enumerate(samples)]
    return header, logs
