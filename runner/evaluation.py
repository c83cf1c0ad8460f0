"""Scoring a workspace snapshot with the task's hidden eval.py, in the sandbox."""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from .models import Step, error_summary
from .preparation import PreparedTask, task_version_prepare
from .sandbox import Limits, Mount, Sandbox, folder_mounts
from .sandbox.identity import writable_for_sandbox
from .sandbox.process import run_process
from .sandboxes import get_sandbox
from .snapshots import BlobStore, Manifest, remove_tree, workspace_restore

# The harness (runner/harness/score.py) runs inside the sandbox: it imports scripts/eval.py as MLAgentBench
# does, calls get_score on the submission and reports on a pipe (or a folder for backends that cannot pass one).
HARNESS_DIR = Path(__file__).resolve().parent / "harness"
HARNESS_TARGET = "/opt/mlab/harness"
RESULT_LIMIT = 65536


@dataclass
class EvalResult:
    score: float | None
    error: str
    log: str
    duration_s: float


def result_parse(data: bytes) -> tuple[float | None, str]:
    """The harness's (score, error); anything malformed is an error, never a crash."""
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None, "the evaluation did not report a result"
    if not isinstance(parsed, dict):
        return None, "the evaluation reported something that is not a result"
    score, error = parsed.get("score"), parsed.get("error", "")
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        score = None
    return (float(score) if score is not None else None), str(error)[:8000]


def evaluate(
    prepared: PreparedTask,
    manifest: Manifest,
    *,
    sandbox: Sandbox,
    tick: Callable[[], None] | None = None,
) -> EvalResult:
    """Score a snapshot: restore it to a scratch folder and run get_score on it next to the hidden scripts."""
    scratch = Path(tempfile.mkdtemp(prefix="eval-", dir=settings.BENCH_RUNS_DIR))
    read_end = write_end = None
    try:
        env_dir = scratch / "env"
        read_only = set(prepared.read_only_files)
        workspace_restore(manifest, env_dir, BlobStore(), read_only=read_only, sandbox=sandbox)
        mounts = [
            Mount(HARNESS_DIR, HARNESS_TARGET),
            Mount(prepared.scripts_dir, "/task/scripts"),
            *folder_mounts(env_dir, "/task/env", read_only),
        ]
        memory = int(prepared.version.resources.get("memory_mb", 4096))
        options = {}
        if sandbox.passes_fds:
            read_end, write_end = os.pipe()
            channel, options["pass_fds"] = str(write_end), (write_end,)
        else:
            (scratch / "out").mkdir()
            writable_for_sandbox(scratch / "out", sandbox.ids)
            mounts.append(Mount(scratch / "out", "/task/out", writable=True))
            channel = "/task/out"
        proc = sandbox.popen(
            [sandbox.python, f"{HARNESS_TARGET}/score.py", "/task/scripts", "/task/env", channel],
            mounts=mounts,
            cwd="/task/scripts",
            limits=Limits(memory_mb=max(memory, 2048) * 2),
            **options,
        )
        if write_end is not None:
            os.close(write_end)
            write_end = None
            os.set_blocking(read_end, False)
        result = run_process(proc, timeout=settings.BENCH_EVAL_TIMEOUT_S, keep_bytes=8000, tick=tick)
        log = (result.stdout + result.stderr).strip()
        if result.timed_out:
            return EvalResult(None, f"eval.py did not finish within {settings.BENCH_EVAL_TIMEOUT_S} s", log, 0)
        data = _read_result(read_end, scratch / "out" / "result.json")
        if not data:
            return EvalResult(
                None, f"the evaluation process exited with code {result.exit_code} before scoring", log, 0
            )
        score, error = result_parse(data)
        return EvalResult(score, error, log, result.duration_s)
    finally:
        for fd in (read_end, write_end):
            if fd is not None:
                os.close(fd)
        remove_tree(scratch)


def _read_result(read_end: int | None, path: Path) -> bytes:
    if read_end is not None:
        try:
            return os.read(read_end, RESULT_LIMIT)
        except BlockingIOError:
            return b""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.read(fd, RESULT_LIMIT)
    finally:
        os.close(fd)


def step_score(*, step_id: int) -> float | None:
    """Score the workspace as it was after one step; every step of the run with that snapshot gets the score."""
    step = Step.objects.select_related("run__task_version").get(pk=step_id)
    sandbox = get_sandbox(step.run.sandbox or None)
    prepared = task_version_prepare(step.run.task_version, sandbox=sandbox)
    result = evaluate(prepared, BlobStore().manifest_load(step.snapshot), sandbox=sandbox)
    for same in Step.objects.filter(run=step.run, snapshot=step.snapshot):
        same.score = result.score
        same.detail = {**same.detail, "eval_error": error_summary(result.error)} if result.error else same.detail
        same.save(update_fields=["score", "detail"])
    return result.score
