"""Score a run's final workspace the way MLAgentBench does, outside the platform: import eval.py, call it."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

from runner.execution.preparation import cache_dir
from runner.models import Run
from runner.workspace.snapshots import BlobStore, manifest_restore


def eval_score_of(run: Run, folder: Path) -> float:
    store = BlobStore()
    env = folder / "env"
    manifest_restore(store.manifest_load(run.final_snapshot), env, store)
    scripts = folder / "scripts"
    shutil.copytree(cache_dir(run.task_version) / "scripts", scripts)
    spec = importlib.util.spec_from_file_location(f"eval_{run.pk}", scripts / "eval.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(scripts))
    try:
        spec.loader.exec_module(module)
        return float(module.get_score(str(env)))
    finally:
        sys.path.remove(str(scripts))
