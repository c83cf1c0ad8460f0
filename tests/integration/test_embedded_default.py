"""`make run`'s stack: SQLite in var/ and the filesystem broker, a worker process beside the command."""

import json
import subprocess
import sys

import pytest

from runner.snapshots import BlobStore, manifest_restore

from .conftest import ROOT, service_env, start_worker, stop_worker

pytestmark = pytest.mark.integration


def manage(env, *args, timeout=300) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_the_embedded_default_runs_the_baseline_end_to_end(tmp_path):
    var = tmp_path / "var"
    env = service_env(BENCH_VAR_DIR=str(var), CELERY_QUEUE="bench")
    manage(env, "migrate", "--noinput")
    manage(env, "load_builtin_tasks")
    worker = start_worker(env, tmp_path / "worker.log", "bench")
    try:
        out = manage(env, "bench_run", "--agent", "baseline", "--task", "digits", "--wait", "--timeout", "300")
    finally:
        stop_worker(worker)
    final = json.loads(out.strip().splitlines()[-1])
    assert final["status"] == "finished", final
    assert (var / "bench.sqlite3").exists()
    assert any((var / "broker" / "processed").iterdir()) or "received" in (tmp_path / "worker.log").read_text()

    probe = (
        f"import json; from runner.models import Run; r = Run.objects.get(pk={final['run']}); "
        "print(json.dumps({'actions': list(r.steps.values_list('action', flat=True)), "
        "'snapshot': r.final_snapshot, 'digest': r.task_version.digest, 'worker': r.worker}))"
    )
    facts = json.loads(manage(env, "shell", "-c", probe).strip().splitlines()[-1])
    assert facts["actions"] == ["List Files", "Execute Script", "Final Answer"]
    assert facts["worker"] not in ("", "inline")

    # Score the final snapshot outside the platform, with the task's own eval.py.
    store = BlobStore(var / "media" / "blobs")
    submission = tmp_path / "submission"
    manifest_restore(store.manifest_load(facts["snapshot"]), submission, store)
    sys.path.insert(0, str(var / "tasks" / facts["digest"] / "scripts"))
    try:
        import importlib

        eval_module = importlib.import_module("eval")
        importlib.reload(eval_module)
        assert final["final_score"] == pytest.approx(eval_module.get_score(str(submission)))
    finally:
        sys.path.pop(0)
