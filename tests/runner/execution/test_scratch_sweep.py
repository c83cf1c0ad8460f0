"""Scratch folders do not pile up: a new attempt removes what older attempts of its run left, and the reaper
removes what no live attempt uses (a dead worker's workspaces and evaluation folders, old step-score folders)."""

import os
import time

import pytest

from runner.execution.reaper import scratch_sweep
from runner.execution.workspaces import attempt_scratch_remove
from runner.models import Run
from tests.factories import RunFactory

pytestmark = pytest.mark.django_db


def folders(run_dir, *names):
    for name in names:
        (run_dir / name / "sub").mkdir(parents=True)
        (run_dir / name / "sub" / "big.bin").write_bytes(b"x" * 1000)
    (run_dir / "agent-1.stderr.log").write_text("log")


def left(run_dir) -> set[str]:
    return {path.name for path in run_dir.iterdir()}


def test_a_new_attempt_removes_the_folders_of_older_attempts_only(tmp_path):
    folders(tmp_path, "workspace-1", "eval-1-abc", "workspace-2", "eval-2-def", "workspace-10")
    attempt_scratch_remove(tmp_path, below=2)
    assert left(tmp_path) == {"workspace-2", "eval-2-def", "workspace-10", "agent-1.stderr.log"}


def test_the_reaper_removes_what_no_live_attempt_uses(tiny_task, settings):
    runs_dir = settings.BENCH_RUNS_DIR
    running = RunFactory(task_version=tiny_task, status=Run.Status.RUNNING, attempt=3)
    queued = RunFactory(task_version=tiny_task, status=Run.Status.QUEUED, attempt=2)
    ended = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, attempt=1)
    for run in (running, queued, ended):
        folders(runs_dir / str(run.pk), "workspace-1", "workspace-2", "eval-2-x", "workspace-3", "eval-3-y")
    old_score, new_score = runs_dir / "score-step-7-aa", runs_dir / "score-step-8-bb"
    old_score.mkdir()
    new_score.mkdir()
    long_ago = time.time() - settings.BENCH_EVAL_TIMEOUT_S - settings.BENCH_ACTION_TIMEOUT_S - 700
    os.utime(old_score, (long_ago, long_ago))

    scratch_sweep()

    assert left(runs_dir / str(running.pk)) == {"workspace-3", "eval-3-y", "agent-1.stderr.log"}
    # a queued run's next attempt is its 3rd: folders numbered 3 cannot be its own yet, but are left alone
    assert left(runs_dir / str(queued.pk)) == {"workspace-3", "eval-3-y", "agent-1.stderr.log"}
    assert left(runs_dir / str(ended.pk)) == {"agent-1.stderr.log"}
    assert not old_score.exists() and new_score.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="sized workspaces are mounted by a root worker only")
def test_the_reaper_unmounts_the_sized_workspace_a_dead_attempt_left(tiny_task, settings):
    from runner.workspace.mounts import overlay_mount, sized_mount, support_paths

    ended = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, attempt=1)
    workspace = settings.BENCH_RUNS_DIR / str(ended.pk) / "workspace-1"
    sized_mount(workspace, limit_mb=8, max_files=100)
    overlay_mount(workspace)
    (workspace / "written.txt").write_text("left behind")
    assert os.path.ismount(workspace)

    scratch_sweep()

    assert not os.path.ismount(workspace) and not workspace.exists()
    assert not any(path.exists() for path in support_paths(workspace))  # the tmpfs holding the writes is gone
