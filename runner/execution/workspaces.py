"""An attempt's workspace on the worker and the environment its actions run in.

A run has a folder on the worker (``runs_dir``); each attempt lays out its own workspace there from the run's last
committed snapshot (an old attempt that finds out late it lost the run removes only its own) and first removes
what older attempts left behind (``attempt_scratch_remove``): a dead worker's workspaces and evaluation folders.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from task_bank.models import TaskVersion

from ..actions import Environment
from ..models import Run, Step
from ..sandbox import Limits, Sandbox
from ..sandbox.masks import package_masks
from ..workspace.mounts import remove_tree, workspace_layout
from ..workspace.snapshots import BlobStore, Snapshotter
from .preparation import PreparedTask


def runs_dir(run: Run) -> Path:
    return Path(settings.BENCH_RUNS_DIR) / str(run.pk)


def attempt_scratch_remove(run_dir: Path, *, below: int | None) -> list[Path]:
    """Remove the workspace and evaluation folders of a run's attempts numbered below ``below`` (None: all of
    them): what a dead worker left behind. An older attempt still running finds out it lost the run and writes
    nothing."""
    removed = []
    for path in run_dir.glob("*-*"):
        kind, _, rest = path.name.partition("-")
        attempt = rest.partition("-")[0]
        old = attempt.isdigit() and (below is None or int(attempt) < below)
        if kind in ("workspace", "eval") and old and path.is_dir():
            remove_tree(path)
            removed.append(path)
    return removed


def attempt_workspace_lay_out(
    *, run: Run, attempt: int, workspace: Path, prepared: PreparedTask, store: BlobStore, sandbox: Sandbox
) -> Snapshotter:
    """The attempt's workspace: the latest committed snapshot (or the task's env), read-only data linked; returns
    the snapshotter whose snapshots store what differs from the task's env. Sets the run's initial snapshot."""
    run_dir = runs_dir(run)
    remove_tree(workspace)
    run_dir.mkdir(parents=True, exist_ok=True)
    attempt_scratch_remove(run_dir, below=attempt)
    last = Step.objects.filter(run=run).order_by("-index").values_list("snapshot", flat=True).first()
    manifest = store.manifest_load(last) if last else prepared.env_manifest
    snapshotter = workspace_layout(  # a sized filesystem where the worker can mount one
        manifest,
        workspace,
        store,
        read_only=set(prepared.read_only_files),
        sandbox=sandbox,
        filesystem=settings.BENCH_WORKSPACE_FS,
        limit_mb=settings.BENCH_WORKSPACE_LIMIT_MB,
        max_files=settings.BENCH_WORKSPACE_MAX_FILES,
    )
    snapshotter.deltas_from(prepared.env_manifest_sha, prepared.env_manifest)  # a step stores its changes
    if not run.initial_snapshot:
        run.initial_snapshot = prepared.env_manifest_sha
        Run.objects.filter(pk=run.pk).update(initial_snapshot=prepared.env_manifest_sha)
    return snapshotter


def script_time_s(version: TaskVersion) -> int:
    """How long one script may run: the task's own limit (``[limits] script_time_s``), else the platform's
    ``BENCH_ACTION_TIMEOUT_S``; a task that gives its scripts none of their own (0, as a bare MLAgentBench folder
    does) has them bounded by the run's time limit only."""
    own = version.script_time_s
    if own is None:
        return settings.BENCH_ACTION_TIMEOUT_S
    return own or version.max_time_s


def script_limits(version: TaskVersion) -> Limits:
    """What a script of the workspace may use: the task's resources (its own script memory, else its memory
    doubled, as headroom for the interpreter), and CPU time for a script's whole time limit on every CPU."""
    resources = version.resources or {}
    cpus = float(resources.get("cpus", 1))
    return Limits(
        memory_mb=version.script_memory_mb or int(resources.get("memory_mb", 4096)) * 2,
        cpus=cpus,
        gpus=int(resources.get("gpus", 0)),
        cpu_seconds=settings.BENCH_ACTION_CPU_S or int(script_time_s(version) * max(cpus, 1)),
    )


def action_environment(
    *,
    version: TaskVersion,
    prepared: PreparedTask,
    workspace: Path,
    sandbox: Sandbox,
    on_output: Callable[[str, bytes], None],
    tick: Callable[[], None],
    llm: Callable[[list[dict], str, dict], str] | None,
) -> Environment:
    """The environment the attempt's actions run in: its workspace, the task's read-only files and resources."""
    limits = script_limits(version)
    return Environment(
        workspace=workspace,
        sandbox=sandbox,
        read_only_patterns=list(version.read_only_patterns),
        read_only_files=prepared.read_only_files,
        limits=limits,
        action_timeout_s=script_time_s(version),
        observation_limit=settings.BENCH_OBSERVATION_LIMIT,
        on_output=on_output,
        tick=tick,
        python=sandbox.python,
        cpus=int(limits.cpus),
        research_problem=version.research_problem,
        llm=llm,
        workspace_limit_mb=settings.BENCH_WORKSPACE_LIMIT_MB,
        masks=package_masks(sandbox, version.hidden_package_data),
        packages=prepared.packages,
    )
