"""Scoring a workspace snapshot with the task's hidden eval.py, in the sandbox."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from .preparation import PreparedTask
from .sandbox import Limits, Mount, Sandbox, folder_mounts, sandbox_python
from .sandbox.process import run_process
from .snapshots import BlobStore, Manifest, manifest_restore

# Runs inside the sandbox: import scripts/eval.py as MLAgentBench does and call get_score on the submission.
HARNESS = r"""
import importlib.util, json, math, os, sys, traceback
scripts, submission, out = sys.argv[1:4]
result = {}
try:
    sys.path.insert(0, scripts)
    spec = importlib.util.spec_from_file_location("eval", os.path.join(scripts, "eval.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["eval"] = module
    spec.loader.exec_module(module)
    if not callable(getattr(module, "get_score", None)):
        result = {"error": "eval.py has no get_score(submission_folder) function"}
    else:
        score = module.get_score(submission)
        try:
            value = float(score)
        except (TypeError, ValueError):
            result = {"error": "get_score returned %s %.200r; expected a number" % (type(score).__name__, score)}
        else:
            if math.isfinite(value):
                result = {"score": value}
            else:
                result = {"error": "get_score returned %r; expected a finite number" % value}
except BaseException as exc:
    result = {"error": "get_score raised:\n" + "".join(traceback.format_exception(exc))[-6000:]}
with open(os.path.join(out, "result.json"), "w") as fh:
    json.dump(result, fh)
"""


@dataclass
class EvalResult:
    score: float | None
    error: str
    log: str
    duration_s: float


def evaluate(
    prepared: PreparedTask,
    manifest: Manifest,
    *,
    sandbox: Sandbox,
    tick: Callable[[], None] | None = None,
) -> EvalResult:
    """Score a snapshot: restore it to a scratch folder and run get_score on it next to the hidden scripts."""
    scratch = Path(tempfile.mkdtemp(prefix="eval-", dir=settings.BENCH_RUNS_DIR))
    try:
        env_dir = scratch / "env"
        manifest_restore(manifest, env_dir, BlobStore(), link=set(prepared.read_only_files))
        out = scratch / "out"
        out.mkdir()
        memory = int(prepared.version.resources.get("memory_mb", 4096))
        proc = sandbox.popen(
            [sandbox_python(), "-c", HARNESS, "/task/scripts", "/task/env", "/task/out"],
            mounts=[
                Mount(prepared.scripts_dir, "/task/scripts"),
                *folder_mounts(env_dir, "/task/env", prepared.read_only_files),
                Mount(out, "/task/out", writable=True),
            ],
            cwd="/task/scripts",
            limits=Limits(memory_mb=max(memory, 2048) * 2),
        )
        result = run_process(proc, timeout=settings.BENCH_EVAL_TIMEOUT_S, keep_bytes=8000, tick=tick)
        log = (result.stdout + result.stderr).strip()
        if result.timed_out:
            return EvalResult(None, f"eval.py did not finish within {settings.BENCH_EVAL_TIMEOUT_S} s", log, 0)
        path = out / "result.json"
        if not path.exists():
            return EvalResult(
                None, f"the evaluation process exited with code {result.exit_code} before scoring", log, 0
            )
        data = json.loads(path.read_text())
        score = data.get("score")
        if score is not None and not math.isfinite(score):
            score = None
        return EvalResult(score, data.get("error", ""), log, result.duration_s)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def step_score(*, step_id: int) -> float | None:
    """Score the workspace as it was after one step; every step of the run with that snapshot gets the score."""
    from .models import Step
    from .preparation import task_version_prepare
    from .sandbox import get_sandbox

    step = Step.objects.select_related("run__task_version").get(pk=step_id)
    sandbox = get_sandbox(step.run.sandbox or None)
    prepared = task_version_prepare(step.run.task_version, sandbox=sandbox)
    result = evaluate(prepared, BlobStore().manifest_load(step.snapshot), sandbox=sandbox)
    for same in Step.objects.filter(run=step.run, snapshot=step.snapshot):
        same.score = result.score
        same.detail = {**same.detail, "eval_error": result.error[-2000:]} if result.error else same.detail
        same.save(update_fields=["score", "detail"])
    return result.score
