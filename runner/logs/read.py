"""An MLAgentBench log read and checked (``log_read``), before anything is written: its steps, their timing and usage,
the workspace folders, and the extras a log this platform exported carries. Whatever is wrong is one
``LogImportError`` naming it. ``imports.py`` turns what is read into a run."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from .exports import ENV_LOG, ERROR_FILE, EXTRAS, EXTRAS_FORMAT, OVERALL_TIME, TRACE_FILE

MAX_STEPS = 10_000
EXPECTED = "an MLAgentBench log folder (env_log/trace.json, env_log/traces/step_N_files/)"


STEP_DIR_RE = re.compile(r"^step_(\d+|final)_files$")


#: How MLAgentBench's environment starts the observation of an action that failed.
ERROR_OBSERVATIONS = ("EnvError:", "LLMError:", "Invalid action:")


ERROR_LIMIT = 8000


class LogImportError(Exception):
    """A log cannot be imported; the message says what is wrong and what is expected."""


@dataclass
class LoggedStep:
    action: str
    args: object
    observation: str
    timestamp: float
    entries: dict = field(default_factory=dict)
    low_level: list[dict] = field(default_factory=list)


@dataclass
class Log:
    """An MLAgentBench log, read and checked: nothing of it is stored yet."""

    env_log: Path
    steps: list[LoggedStep]
    task_description: str
    step_dirs: dict[int, Path]
    final_dir: Path | None
    overall_time: float | None
    error: str | None
    extras: dict


def _env_log(root: Path) -> Path:
    """The folder holding trace.json: the log's env_log/, or the folder itself; through folders that hold only one
    folder (a zip of MLAgentBench's logs/<task>/<run>/)."""
    for _ in range(8):
        for candidate in (root / ENV_LOG, root):
            if (candidate / TRACE_FILE).is_file():
                return candidate
        inside = list(root.iterdir())
        if len(inside) != 1 or not inside[0].is_dir():
            break
        root = inside[0]
    raise LogImportError(f"no {TRACE_FILE} found (looked in {ENV_LOG}/ and at the top); expected {EXPECTED}")


def log_number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


#: Seconds since the epoch that a date can be made of (up to the year 9999).
LATEST_TIMESTAMP = 253_402_300_799.0


#: The bounds of what a log may say of a run's use, as the run's fields can hold them.
USAGE_BOUNDS = {
    "tokens_in": 2**31 - 1,
    "tokens_out": 2**31 - 1,
    "cost": 999_999.0,
    "cpu_seconds": 1e9,
    "peak_memory_mb": 1e9,
    "wall_seconds": 1e9,
}


def _bounded(value: object, where: str, *, high: float, low: float = 0.0) -> float | None:
    """A number the log gives, or None when it gives none; ``LogImportError`` when it gives one that is not a
    finite number from ``low`` to ``high``."""
    if value is None:
        return None
    number = log_number(value)
    if number is None or not low <= number <= high:
        raise LogImportError(f"{where} is {str(value)[:40]!r}; expected a number from {low:g} to {high:g}")
    return number


def _logged_step(raw: object, where: str) -> LoggedStep:
    """One entry of trace.json's steps or low_level_steps: {action: {name, args}, observation, timestamp}."""
    if not isinstance(raw, dict):
        raise LogImportError(f"trace.json: {where} is not an object; expected {{action, observation, timestamp}}")
    action = raw.get("action")
    if not isinstance(action, dict) or not isinstance(action.get("name"), str) or not action["name"]:
        raise LogImportError(f"trace.json: {where} has no action name; expected action: {{name, args}}")
    observation = raw.get("observation", "")
    if not isinstance(observation, str):
        raise LogImportError(f"trace.json: {where}'s observation is not a string")
    timestamp = _bounded(raw.get("timestamp"), f"trace.json: {where}'s timestamp", high=LATEST_TIMESTAMP)
    if timestamp is None:
        raise LogImportError(f"trace.json: {where} has no timestamp (seconds since the epoch, a number)")
    entries = raw.get("entries", {})
    return LoggedStep(
        action=action["name"][:100],
        args=action.get("args", {}),
        observation=observation,
        timestamp=timestamp,
        entries={str(k)[:100]: str(v) for k, v in entries.items()} if isinstance(entries, dict) else {},
    )


def _in_order(steps: list[LoggedStep], kind: str) -> None:
    for i in range(1, len(steps)):
        if steps[i].timestamp < steps[i - 1].timestamp:
            raise LogImportError(
                f"trace.json: {kind} {i} is dated before {kind} {i - 1} ({steps[i].timestamp} < "
                f"{steps[i - 1].timestamp}): the steps are out of order"
            )


def trace_parse(text: str) -> tuple[list[LoggedStep], str]:
    """trace.json's steps (with their low-level steps, each given to the step it was taken in: the first step
    that ended at or after it) and its task description."""
    data = _json_parse(text, TRACE_FILE)
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise LogImportError(
            "trace.json has no list of steps; expected MLAgentBench's trace (steps, low_level_steps, action_infos, "
            "task_description)"
        )
    if len(data["steps"]) > MAX_STEPS:
        raise LogImportError(f"trace.json has {len(data['steps'])} steps; at most {MAX_STEPS} are imported")
    steps = [_logged_step(raw, f"step {i}") for i, raw in enumerate(data["steps"])]
    _in_order(steps, "step")
    low_raw = data.get("low_level_steps", [])
    if not isinstance(low_raw, list):
        raise LogImportError("trace.json: low_level_steps is not a list")
    low = [_logged_step(raw, f"low-level step {i}") for i, raw in enumerate(low_raw)]
    _in_order(low, "low-level step")
    owner = 0
    for i, step in enumerate(low):
        while owner < len(steps) and steps[owner].timestamp < step.timestamp:
            owner += 1
        if owner == len(steps):
            raise LogImportError(f"trace.json: low-level step {i} is dated after the last step")
        low_step = {"action": step.action, "input": step.args, "observation": step.observation}
        if step.timestamp != steps[owner].timestamp:  # a time of its own (an export without one gives its step's)
            low_step["timestamp"] = step.timestamp
        steps[owner].low_level.append(low_step)
    description = data.get("task_description", "")
    return steps, description if isinstance(description, str) else ""


#: A log parsed here holds at most one list or object per CONTAINER_BYTES of its text, and one value per
#: VALUE_BYTES: the objects Python makes of it then take a few times its size, not 25 (64 MB of "[]," is 1.7 GB).
#: Real logs are far sparser (keys, strings, indentation). Below SPARSE_ENOUGH characters nothing is counted.
CONTAINER_BYTES, VALUE_BYTES, SPARSE_ENOUGH = 32, 6, 1 << 20
#: A string of a JSON text whose escaped backslashes and quotes are taken out; counted a piece at a time.
QUOTED, PIECE = re.compile(r'"[^"]*"'), 4 << 20


def _density_check(text: str, name: str) -> None:
    """LogImportError when ``text`` holds more lists, objects or values than a log of its size does: counted
    before any is made, outside its strings, a piece at a time (a copy of the text at most)."""
    size = len(text)
    containers = text.count("[") + text.count("{")
    if size < SPARSE_ENOUGH or (
        containers <= size // CONTAINER_BYTES and containers + text.count(",") <= size // VALUE_BYTES
    ):
        return  # sparse enough even counting what its strings hold
    bare = text.replace("\\\\", "").replace('\\"', "")  # every quote left opens or closes a string
    containers = values = 0
    inside = False
    for start in range(0, len(bare), PIECE):
        piece, opened = bare[start : start + PIECE], inside
        inside ^= piece.count('"') % 2 == 1
        outside = QUOTED.sub("", ('"' if opened else "") + piece + ('"' if inside else ""))
        found = outside.count("[") + outside.count("{")
        containers, values = containers + found, values + found + outside.count(",")
    if containers > size // CONTAINER_BYTES or values > size // VALUE_BYTES:
        raise LogImportError(
            f"{name} holds {containers} lists and objects and about {values} values in {size} characters: more "
            f"than a log holds (at most one list or object per {CONTAINER_BYTES} characters and one value per "
            f"{VALUE_BYTES}); it is not read"
        )


def _json_parse(text: str, name: str) -> object:
    _density_check(text, name)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise LogImportError(f"{name} does not parse as JSON: {exc}") from None
    except RecursionError:
        raise LogImportError(f"{name} nests lists or objects too deeply to be read") from None


def _extras_check(extras: dict) -> None:
    """What this platform's run record says of each step and of the run's use, checked before anything is stored:
    numbers in the range their fields hold (``LogImportError`` naming the first that is not)."""
    steps = extras.get("steps", [])
    if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
        raise LogImportError(f"{EXTRAS}: steps is not a list of objects")
    for i, step in enumerate(steps):
        index = step.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < MAX_STEPS:
            raise LogImportError(f"{EXTRAS}: steps[{i}].index is {str(index)[:40]!r}; expected a step's index")
        _bounded(step.get("started_at"), f"{EXTRAS}: steps[{i}].started_at", high=LATEST_TIMESTAMP)
        for key in ("tokens_in", "tokens_out", "cost"):
            _bounded(step.get(key), f"{EXTRAS}: steps[{i}].{key}", high=USAGE_BOUNDS[key])
    usage = extras.get("usage", {})
    if not isinstance(usage, dict):
        raise LogImportError(f"{EXTRAS}: usage is not an object")
    for key, high in USAGE_BOUNDS.items():
        _bounded(usage.get(key), f"{EXTRAS}: usage.{key}", high=high)


def _text_file(path: Path, limit: int = ERROR_LIMIT) -> str:
    return path.read_bytes()[-limit:].decode("utf-8", errors="replace")


def log_read(root: Path) -> Log:
    """Read and check an unpacked log (``LogImportError`` on anything wrong)."""
    env_log = _env_log(root)
    size = (env_log / TRACE_FILE).stat().st_size
    if size > settings.BENCH_TRACE_JSON_MAX_BYTES:
        raise LogImportError(
            f"{TRACE_FILE} is {size} bytes; at most {settings.BENCH_TRACE_JSON_MAX_BYTES} bytes are read "
            "(BENCH_TRACE_JSON_MAX_BYTES)"
        )
    try:
        text = (env_log / TRACE_FILE).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise LogImportError("trace.json is not UTF-8 text") from None
    steps, description = trace_parse(text)
    step_dirs: dict[int, Path] = {}
    final_dir = None
    traces = env_log / "traces"
    if traces.is_dir():
        for entry in sorted(traces.iterdir()):
            match = STEP_DIR_RE.match(entry.name)
            if not match or not entry.is_dir():
                continue
            if match[1] == "final":
                final_dir = entry
                continue
            index = int(match[1])
            if index >= len(steps):
                raise LogImportError(
                    f"traces/{entry.name} belongs to no step: trace.json has {len(steps)} steps (0 to {len(steps) - 1})"
                )
            step_dirs[index] = entry
    overall_time = None
    if (env_log / OVERALL_TIME).is_file():
        overall_time = log_number(_float_or_none(_text_file(env_log / OVERALL_TIME, 100)))
        if overall_time is None or not 0 <= overall_time <= USAGE_BOUNDS["wall_seconds"]:
            raise LogImportError(
                f"{OVERALL_TIME} does not hold a number of seconds (from 0 to {USAGE_BOUNDS['wall_seconds']:g})"
            )
    error = _text_file(env_log / ERROR_FILE) if (env_log / ERROR_FILE).is_file() else None
    extras = {}
    places = [env_log.parent / EXTRAS] if env_log != root else []  # never a file outside the log
    for place in [*places, env_log / EXTRAS]:
        if place.is_file():
            try:
                extras = _json_parse(place.read_text(encoding="utf-8"), EXTRAS)
            except UnicodeDecodeError as exc:
                raise LogImportError(f"{EXTRAS} is not UTF-8 text: {exc}") from None
            if not isinstance(extras, dict) or extras.get("format") != EXTRAS_FORMAT:
                raise LogImportError(f"{EXTRAS} is not this platform's run record (format {EXTRAS_FORMAT!r})")
            _extras_check(extras)
            break
    return Log(env_log, steps, description, step_dirs, final_dir, overall_time, error, extras)


def _float_or_none(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None
