"""A run as an MLAgentBench log: the folder MLAgentBench's runner writes, zipped, so that its own tools (eval.py,
resuming from a step) read it, and ``imports.log_import`` brings it back.

    run-<id>/env_log/trace.json                      steps, low_level_steps, action_infos, task_description
    run-<id>/env_log/traces/step_<N>_files/          the workspace after step N, its read-only files left out
    run-<id>/env_log/traces/step_final_files/        the final workspace, the same way (not after error.txt)
    run-<id>/env_log/overall_time.txt                the run's wall time in seconds (an ended run only)
    run-<id>/env_log/error.txt                       how the run failed, where MLAgentBench writes one
    run-<id>/agent_log/main_log                      the agent's entries and actions, step by step
    run-<id>/log                                     one line per step and the run's end
    run-<id>/mlab_bench.json                         what MLAgentBench has no field for (``EXTRAS``)

MLAgentBench copies into a step's folder every file of the workspace except the task's read-only ones; here the
read-only files left out are those of the starting workspace that are still as they were.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from pathlib import Path

from task_bank.package import is_read_only

from ..models import Run, error_summary
from ..selectors import run_steps, run_trace_json
from ..workspace.snapshots import BlobStore, Manifest

ENV_LOG = "env_log"
TRACE_FILE = "trace.json"
STEP_FILES = "traces/step_{}_files"
FINAL_FILES = "traces/step_final_files"
OVERALL_TIME = "overall_time.txt"
ERROR_FILE = "error.txt"
#: Our fields MLAgentBench has no place for (score, agent, model, status, usage), beside env_log/.
EXTRAS = "mlab_bench.json"
EXTRAS_FORMAT = "mlab-bench run log 1"
ZIP_EPOCH = (2020, 1, 1, 0, 0, 0)


def run_log_extras(*, run: Run) -> dict:
    """What ``EXTRAS`` holds: the run's task, agent, model, status, score and usage, and each step's timing and
    usage (MLAgentBench keeps only the time a step ended)."""
    return {
        "format": EXTRAS_FORMAT,
        "run": run.pk,
        "origin": run.origin,
        "task": run.task.slug,
        "task_version": run.task_version.number,
        "agent": run.agent.name,
        "agent_version": run.agent.version,
        "model": run.model,
        "status": run.status,
        "failure_kind": run.failure_kind,
        "error": run.error,
        "final_score": run.final_score,
        "improvement": run.improvement,
        "succeeded": run.succeeded,
        "final_answer": run.final_answer,
        "usage": {
            "tokens_in": run.tokens_in,
            "tokens_out": run.tokens_out,
            "cost": float(run.cost),
            "wall_seconds": run.wall_seconds,
            "cpu_seconds": run.cpu_seconds,
            "peak_memory_mb": run.peak_memory_mb,
        },
        "steps": [
            {
                "index": step.index,
                "started_at": step.started_at.timestamp(),
                "duration_s": step.duration_s,
                "tokens_in": step.tokens_in,
                "tokens_out": step.tokens_out,
                "cost": float(step.cost),
                "is_error": step.is_error,
            }
            for step in run.steps.order_by("index")
        ],
    }


def _step_files(manifest: Manifest, initial: Manifest, read_only_patterns: list[str]) -> Manifest:
    """The files MLAgentBench would copy into a step's folder: all but the read-only files of the starting
    workspace, where they are unchanged."""
    return {
        path: entry
        for path, entry in manifest.items()
        if not (is_read_only(path, read_only_patterns) and initial.get(path, [None])[0] == entry[0])
    }


def _write(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def _write_files(archive: zipfile.ZipFile, folder: str, files: Manifest, store: BlobStore) -> None:
    if not files:  # MLAgentBench makes the folder even when there is nothing to copy
        info = zipfile.ZipInfo(f"{folder}/", date_time=ZIP_EPOCH)
        info.external_attr = 0o40755 << 16
        archive.writestr(info, b"")
        return
    for path, (sha, _size) in sorted(files.items()):
        info = zipfile.ZipInfo(f"{folder}/{path}", date_time=ZIP_EPOCH)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        with store.open(sha) as src, archive.open(info, "w") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)


def _main_log(run: Run) -> str:
    lines = [f"Research problem:\n{run.task_version.research_problem}\n"]
    for step in run_steps(run=run):
        lines.append(f"Step {step.index}:")
        lines.extend(f"{name}: {value}" for name, value in step.entries.items())
        lines.append(f"Action: {step.action}")
        lines.append(f"Action Input: {json.dumps(step.action_input)}")
        lines.append(f"Observation:\n{step.observation}\n")
    return "\n".join(lines)


def _run_log(run: Run) -> str:
    lines = [f"step {s.index}: {s.action}" for s in run.steps.order_by("index").only("index", "action")]
    lines.append(f"run ended: {run.status}" + (f" ({error_summary(run.error)})" if run.error else ""))
    return "\n".join(lines) + "\n"


def log_export(*, run: Run, out: Path) -> int:
    """Write the run as an MLAgentBench log zip to ``out``; returns the number of steps written."""
    store = BlobStore()
    top = f"run-{run.pk}"
    env_log = f"{top}/{ENV_LOG}"
    initial = store.manifest_load(run.initial_snapshot) if run.initial_snapshot else {}
    patterns = list(run.task_version.read_only_patterns)
    steps = list(run.steps.order_by("index").values_list("index", "snapshot"))
    trace = run_trace_json(run=run)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        _write(archive, f"{env_log}/{TRACE_FILE}", json.dumps(trace, indent=4).encode())
        manifests: dict[str, Manifest] = {}
        last = run.initial_snapshot
        for index, snapshot in steps:
            last = snapshot or last
            if last and last not in manifests:
                manifests[last] = store.manifest_load(last)
            files = _step_files(manifests.get(last, {}), initial, patterns)
            _write_files(archive, f"{env_log}/{STEP_FILES.format(index)}", files, store)
        # As MLAgentBench's runner: a run that ended in an error of its own (the time limit between steps, a model
        # error, a crash, the platform's failure) gets error.txt and no final files; one that ended normally (a
        # Final Answer, the step limit, the agent's own return, the time limit inside a script) gets its final
        # files and no error.txt. So its plot.py counts and scores our exports as it does its own logs.
        erred = run.has_ended and not Run.objects.filter(Run.MLAGENTBENCH_COUNTED, pk=run.pk).exists()
        final = run.final_snapshot or last
        if final and not erred:
            manifest = manifests.get(final) or store.manifest_load(final)
            _write_files(archive, f"{env_log}/{FINAL_FILES}", _step_files(manifest, initial, patterns), store)
        if run.has_ended:
            _write(archive, f"{env_log}/{OVERALL_TIME}", str(run.wall_seconds).encode())
        if erred:
            _write(archive, f"{env_log}/{ERROR_FILE}", (run.error or f"the run ended {run.status}").encode())
        _write(archive, f"{top}/agent_log/main_log", _main_log(run).encode())
        _write(archive, f"{top}/log", _run_log(run).encode())
        _write(archive, f"{top}/{EXTRAS}", json.dumps(run_log_extras(run=run), indent=2).encode())
    return len(steps)


def log_export_file(*, run: Run) -> Path:
    """``log_export`` into a new temporary file, which the caller removes."""
    fd, name = tempfile.mkstemp(prefix=f"run-{run.pk}-log-", suffix=".zip")
    os.close(fd)
    path = Path(name)
    try:
        log_export(run=run, out=path)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path
