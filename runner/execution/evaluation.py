"""Scoring a workspace snapshot with the task's hidden eval.py, in the sandbox."""

from __future__ import annotations

import json
import math
import os
import stat
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from ..actions.environment import script_env
from ..actions.types import WORKSPACE
from ..models import Run, Step, eval_error_public
from ..sandbox import Limits, Mount, Sandbox, folder_mounts
from ..sandbox.identity import writable_for_sandbox
from ..sandbox.masks import package_masks
from ..sandbox.process import run_process
from ..workspace.mounts import remove_tree
from ..workspace.snapshots import BlobStore, Manifest, workspace_restore
from .preparation import PreparedTask, task_version_prepare
from .sandboxes import get_sandbox
from .serving import serve_requests
from .workspaces import script_limits, script_time_s

# The harness (runner/harness/score.py) runs inside the sandbox: it imports scripts/eval.py as MLAgentBench
# does, calls get_score on the submission and reports on a pipe (or a folder for backends that cannot pass one).
HARNESS_DIR = Path(__file__).resolve().parent.parent / "harness"
HARNESS_TARGET = "/opt/mlab/harness"
RESULT_LIMIT = 65536
#: The most requests a served task's eval.py may make in one evaluation.
MAX_REQUESTS = 10_000


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
    masks: list[Mount] = field(default_factory=list)


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
    ``scratch_prefix``...) and run get_score on its files next to the hidden scripts (after running the starter
    script afresh in the workspace's sandbox, for a timed task's ``rerun``); for a served task, serve the
    submission eval.py's requests in the workspace's sandbox and score its answers next to the hidden scripts.
    No code of the workspace ever runs where the hidden scripts are."""
    parent = Path(scratch_in or settings.BENCH_RUNS_DIR)
    parent.mkdir(parents=True, exist_ok=True)  # an import scores before any run has made the runs folder
    scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix, dir=parent))
    try:
        env_dir = scratch / "env"
        read_only = set(prepared.read_only_files)
        workspace_restore(manifest, env_dir, BlobStore(), read_only=read_only, sandbox=sandbox)
        if rerun is not None and (failure := _rerun_script(rerun, env_dir, read_only, sandbox, tick)):
            return failure
        room = _HiddenRoom(prepared, sandbox, scratch, tick)
        if prepared.version.serve_script:
            return _evaluate_served(prepared, room, env_dir, read_only, tick)
        return room.score(
            ["/task/scripts", "/task/env", room.CHANNEL], [*folder_mounts(env_dir, "/task/env", read_only)]
        )
    finally:
        remove_tree(scratch)


class _HiddenRoom:
    """Runs the harness beside the task's hidden scripts: on the workspace's files as data, never its code."""

    CHANNEL = "{channel}"

    def __init__(self, prepared: PreparedTask, sandbox: Sandbox, scratch: Path, tick: Callable[[], None] | None):
        self.prepared, self.sandbox, self.scratch, self.tick = prepared, sandbox, scratch, tick

    def score(self, args: list[str], mounts: list[Mount]) -> EvalResult:
        """Run score.py with ``args`` (CHANNEL: where it reports) and the extra ``mounts``; its result."""
        result, data = self.harness(args, mounts)
        if isinstance(result, EvalResult):
            return result
        score, error = result_parse(data)
        return EvalResult(score, error, result.log, result.duration_s)

    def harness(self, args: list[str], mounts: list[Mount]) -> tuple[EvalResult | _Ran, bytes]:
        read_end = write_end = None
        out = self.scratch / f"out-{args[0].strip('-') if args[0].startswith('--') else 'score'}"
        mounts = [
            Mount(HARNESS_DIR, HARNESS_TARGET), Mount(self.prepared.scripts_dir, "/task/scripts"),
            *self.prepared.package_mounts(), *mounts,
        ]  # fmt: skip
        version = self.prepared.version
        memory = int(version.resources.get("memory_mb", 4096))
        options = {}
        try:
            if self.sandbox.passes_fds:
                read_end, write_end = os.pipe()
                channel, options["pass_fds"] = str(write_end), (write_end,)
            else:
                out.mkdir()
                writable_for_sandbox(out, self.sandbox.ids)
                mounts.append(Mount(out, "/task/out", writable=True))
                channel = "/task/out"
            proc = self.sandbox.popen(
                [
                    self.sandbox.python,
                    f"{HARNESS_TARGET}/score.py",
                    *(channel if a == self.CHANNEL else a for a in args),
                ],
                mounts=mounts,
                cwd="/task/scripts",
                # eval.py may need the task's GPUs as much as its scripts (scoring a model by running it).
                limits=Limits(memory_mb=max(memory, 2048) * 2, gpus=int(version.resources.get("gpus", 0))),
                env=self.prepared.package_env(),
                **options,
            )
            if write_end is not None:
                os.close(write_end)
                write_end = None
                os.set_blocking(read_end, False)
            result = run_process(proc, timeout=settings.BENCH_EVAL_TIMEOUT_S, keep_bytes=8000, tick=self.tick)
            log = (result.stdout + result.stderr).strip()
            if result.timed_out:
                return EvalResult(None, f"eval.py did not finish within {settings.BENCH_EVAL_TIMEOUT_S} s", log, 0), b""
            data = _read_result(read_end, out / "result.json")
            if not data:
                error = f"the evaluation process exited with code {result.exit_code} before scoring"
                return EvalResult(None, error, log, 0), b""
            return _Ran(log, result.duration_s), data
        finally:
            for fd in (read_end, write_end):
                if fd is not None:
                    os.close(fd)

    def folder(self, name: str) -> Path:
        path = self.scratch / name
        path.mkdir()
        writable_for_sandbox(path, self.sandbox.ids)
        return path


@dataclass
class _Ran:
    log: str
    duration_s: float


def _evaluate_served(
    prepared: PreparedTask, room: _HiddenRoom, env_dir: Path, read_only: set[str], tick: Callable[[], None] | None
) -> EvalResult:
    """A served task's three steps: eval.py's requests (beside the hidden scripts, without the workspace), the
    submission's answers (in the workspace's sandbox, without the hidden scripts), eval.py's score of them."""
    private, requests = room.folder("private"), room.folder("requests")
    made, data = room.harness(
        ["--requests", "/task/scripts", "/task/private", "/task/requests", room.CHANNEL],
        [Mount(private, "/task/private", writable=True), Mount(requests, "/task/requests", writable=True)],
    )
    if isinstance(made, EvalResult):
        return made
    count, error = _requests_parse(data)
    if error:
        return EvalResult(None, error, made.log, 0)
    answers = room.scratch / "answers"
    answers.mkdir()
    version = prepared.version
    limits = script_limits(version)
    proc = room.sandbox.popen(
        [room.sandbox.python, f"{HARNESS_TARGET}/serve.py", f"{WORKSPACE}/{version.serve_script}"],
        mounts=[
            Mount(HARNESS_DIR, HARNESS_TARGET),
            *folder_mounts(env_dir, WORKSPACE, sorted(read_only)),
            *package_masks(room.sandbox, version.hidden_package_data),
            *prepared.package_mounts(),
        ],
        cwd=WORKSPACE,
        env=script_env(cpus=int(limits.cpus or 1), gpus=limits.gpus) | prepared.package_env(),
        limits=limits,
        stdin=subprocess.PIPE,
    )
    served = serve_requests(proc, requests, count, answers, timeout_s=script_time_s(version), tick=tick)
    if served.error:
        return EvalResult(None, served.error, served.log, 0)
    result = room.score(
        ["--answers", "/task/scripts", "/task/env", "/task/private", "/task/answers", room.CHANNEL],
        [
            *folder_mounts(env_dir, "/task/env", read_only),
            Mount(private, "/task/private"),
            Mount(answers, "/task/answers"),
        ],
    )
    result.duration_s = sum(served.seconds)
    return result


def _requests_parse(data: bytes) -> tuple[int, str]:
    """The count of requests make_requests gave, or the error it reported."""
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return 0, "the evaluation did not report its requests"
    count = parsed.get("requests") if isinstance(parsed, dict) else None
    if isinstance(count, int) and not isinstance(count, bool) and 0 < count <= MAX_REQUESTS:
        return count, ""
    return 0, str(parsed.get("error") if isinstance(parsed, dict) else "")[:8000] or "no requests were made"


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
        mounts=[*folder_mounts(env_dir, WORKSPACE, sorted(read_only)), *rerun.masks],
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
    rerun: Rerun | None,
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
