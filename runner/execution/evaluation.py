"""Scoring a workspace snapshot with the task's hidden eval.py, in the sandbox."""

from __future__ import annotations

import json
import math
import os
import stat
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from ..actions.types import WORKSPACE
from ..models import Run, Step, eval_error_public
from ..sandbox import Limits, Mount, Sandbox, folder_mounts
from ..sandbox.identity import writable_for_sandbox
from ..sandbox.process import run_process
from ..workspace.mounts import remove_tree
from ..workspace.snapshots import BlobStore, Manifest, workspace_restore
from .preparation import PreparedTask, task_version_prepare
from .sandboxes import get_sandbox

# The harness (runner/harness/score.py) runs inside the sandbox: it imports scripts/eval.py as MLAgentBench
# does, calls get_score on the submission and reports on a pipe (or a folder for backends that cannot pass one).
HARNESS_DIR = Path(__file__).resolve().parent.parent / "harness"
HARNESS_TARGET = "/opt/mlab/harness"
RESULT_LIMIT = 65536


@dataclass
class EvalResult:
    score: float | None
    error: str
    log: str
    duration_s: float
    #: Timed tasks: the baseline measured alongside the score, and every measurement of both.
    paired_baseline: float | None = None
    measurements: dict[str, list[float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Rerun:
    """For a timed task: run the starter script afresh before scoring, so that the score is measured here and now
    (a script that records its own time, as MLAgentBench's vectorization does, is timed again). Its earlier
    outputs are removed first."""

    script: str
    outputs: tuple[str, ...]
    limits: Limits
    timeout_s: float
    env: dict[str, str] = field(default_factory=dict)


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


#: Scratch folders of step scores (in the runs folder): the reaper removes those that outlived any evaluation.
STEP_SCORE_SCRATCH = "score-step-"


def evaluate(
    prepared: PreparedTask,
    manifest: Manifest,
    *,
    sandbox: Sandbox,
    tick: Callable[[], None] | None = None,
    rerun: Rerun | None = None,
    scratch_in: Path | None = None,
    scratch_prefix: str = "eval-",
) -> EvalResult:
    """Score a snapshot: restore it to a scratch folder (made in ``scratch_in``, by default the runs folder, named
    ``scratch_prefix``...) and run get_score on it next to the hidden scripts (after running the starter script
    afresh, for a timed task's ``rerun``)."""
    parent = Path(scratch_in or settings.BENCH_RUNS_DIR)
    parent.mkdir(parents=True, exist_ok=True)  # an import scores before any run has made the runs folder
    scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix, dir=parent))
    read_end = write_end = None
    try:
        env_dir = scratch / "env"
        read_only = set(prepared.read_only_files)
        workspace_restore(manifest, env_dir, BlobStore(), read_only=read_only, sandbox=sandbox)
        if rerun is not None and (failure := _rerun_script(rerun, env_dir, read_only, sandbox, tick)):
            return failure
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
            # eval.py may need the task's GPUs as much as its scripts (scoring a model by running it).
            limits=Limits(memory_mb=max(memory, 2048) * 2, gpus=int(prepared.version.resources.get("gpus", 0))),
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


def _rerun_script(
    rerun: Rerun, env_dir: Path, read_only: set[str], sandbox: Sandbox, tick: Callable[[], None] | None
) -> EvalResult | None:
    """Run the starter script in the restored workspace as an agent's Execute Script would; an EvalResult when
    it failed (no score), None when it ran."""
    for rel in rerun.outputs:
        path = env_dir / rel
        if rel not in read_only and path.is_file() and not path.is_symlink():
            path.unlink()
    proc = sandbox.popen(
        [sandbox.python, "-u", rerun.script],
        mounts=folder_mounts(env_dir, WORKSPACE, sorted(read_only)),
        cwd=WORKSPACE,
        env=rerun.env,
        limits=rerun.limits,
    )
    result = run_process(proc, timeout=rerun.timeout_s, keep_bytes=8000, tick=tick)
    if result.exit_code == 0 and not result.timed_out:
        return None
    how = f"did not finish within {rerun.timeout_s:.0f} s" if result.timed_out else f"exited with {result.exit_code}"
    return EvalResult(None, f"the script {rerun.script} {how} when run again to be timed", result.stderr, 0)


def evaluate_paired(
    prepared: PreparedTask,
    manifest: Manifest,
    *,
    sandbox: Sandbox,
    rerun: Rerun,
    rounds: int,
    tick: Callable[[], None] | None = None,
    scratch_in: Path | None = None,
    scratch_prefix: str = "eval-",
) -> EvalResult:
    """A timed task's score, measured paired: the task's own starting workspace (the baseline) and the final one
    are each run and scored ``rounds`` times on this worker, alternately (baseline-final, then final-baseline, so
    that a drift in the machine's load hits both alike). The score is the median of the final workspace's
    measurements, and the improvement is computed against the median of the baseline's."""
    measured: dict[str, list[float]] = {"baseline": [], "final": []}
    logs = []
    for i in range(rounds):
        order = ("baseline", "final") if i % 2 == 0 else ("final", "baseline")
        for which in order:
            source = prepared.env_manifest if which == "baseline" else manifest
            result = evaluate(
                prepared,
                source,
                sandbox=sandbox,
                tick=tick,
                rerun=rerun,
                scratch_in=scratch_in,
                scratch_prefix=scratch_prefix,
            )
            if result.score is None:
                error = f"measuring the {which} workspace failed: {result.error}"
                return EvalResult(None, error, result.log, 0, measurements=measured)
            measured[which].append(result.score)
            logs.append(f"round {i + 1}, {which}: {result.score:.6g}")
    return EvalResult(
        statistics.median(measured["final"]),
        "",
        "\n".join(logs),
        0,
        paired_baseline=statistics.median(measured["baseline"]),
        measurements=measured,
    )


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
    manifest = BlobStore().manifest_load(step.snapshot)
    result = evaluate(prepared, manifest, sandbox=sandbox, scratch_prefix=f"{STEP_SCORE_SCRATCH}{step_id}-")
    for same in Step.objects.filter(run=step.run, snapshot=step.snapshot):
        same.score = result.score
        same.detail = {**same.detail, "eval_error": eval_error_public(result.error)} if result.error else same.detail
        same.save(update_fields=["score", "detail"])
    version = step.run.task_version
    if result.score is not None and not version.timed:  # a timed score needs its paired baseline to mean anything
        runs = Run.objects.filter(pk=step.run_id)
        if version.succeeded_with(result.score):
            runs.update(improved_any_step=True)
        else:
            runs.filter(improved_any_step__isnull=True).update(improved_any_step=False)
    return result.score
