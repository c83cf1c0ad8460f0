"""`make run`'s stack: SQLite in var/ and the filesystem broker, a worker process beside the command."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.workspace.snapshots import BlobStore, manifest_restore
from tests.integration.conftest import ROOT, service_env, start_worker, stop_worker

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
    assert f"run {final['run']} ended finished" in (tmp_path / "worker.log").read_text()  # the worker ran it

    probe = (
        f"import json; from runner.models import Run; r = Run.objects.get(pk={final['run']}); "
        "print(json.dumps({'actions': list(r.steps.values_list('action', flat=True)), "
        "'snapshot': r.final_snapshot, 'digest': r.task_version.digest, 'worker': r.worker}))"
    )
    facts = json.loads(manage(env, "shell", "-c", probe).strip().splitlines()[-1])
    assert facts["actions"] == ["List Files", "Execute Script", "Final Answer"]

    # The pages that rank runs, on SQLite, with the one run counted (a sample deviation of one value is no error).
    pages = (
        "from django.test import Client; c = Client(); "
        "print([c.get(u).status_code for u in ('/', '/leaderboard/', '/tasks/', '/tasks/digits/', '/runs/')])"
    )
    assert manage(env, "shell", "-c", pages).strip().splitlines()[-1] == "[200, 200, 200, 200, 200]"
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


def group_alive(pgid: int) -> list[str]:
    """The processes still in a process group (their command lines)."""
    alive = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getpgid(int(proc.name)) == pgid:
                alive.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except (ProcessLookupError, FileNotFoundError, PermissionError):
            continue
    return alive


def test_ctrl_c_under_make_run_hands_the_run_back_and_leaves_no_process(tmp_path):
    var = tmp_path / "var"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    bin_dir = str(Path(sys.executable).parent)
    env = service_env(BENCH_VAR_DIR=str(var), CELERY_QUEUE="bench", BENCH_PORT=str(port))
    env["PATH"] = f"{bin_dir}:{env.get('PATH', '')}"
    manage(env, "migrate", "--noinput")
    manage(env, "load_builtin_tasks")
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        stack = subprocess.Popen(  # what `make run` starts, in a session of its own like a terminal's
            [sys.executable, "tools/start.py", "Procfile", str(var / "log"), "web", "worker", "demo", "ready"]
            + ["--terminal", "ready"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        queued = json.loads(manage(env, "bench_run", "--agent", "tuner", "--task", "digits").strip().splitlines()[-1])
        run = f"Run.objects.get(pk={queued['run']})"
        probe = f"from runner.models import Run; r = {run}; print(r.status, r.steps_count)"
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            status, steps = manage(env, "shell", "-c", probe).split()[-2:]
            if status == "running" and int(steps) >= 3:
                break
            time.sleep(1)
        else:
            pytest.fail(f"the run did not get going:\n{log.read_text()[-3000:]}")

        os.killpg(stack.pid, signal.SIGINT)  # Ctrl-C: the terminal signals every process of the group
        stack.wait(timeout=60)  # a hang here is the bug
        deadline = time.monotonic() + 30
        while group_alive(stack.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert group_alive(stack.pid) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(stack.pid, signal.SIGKILL)
    status, steps = manage(env, "shell", "-c", probe).split()[-2:]
    worker_log = (var / "log" / "worker.log").read_text()
    assert status == "queued", worker_log[-3000:]  # handed back, to be resumed by the next worker
    assert "handed back to the queue" in worker_log
    said = log.read_text()  # the terminal gets where the site is, where the logs are, and nothing else
    assert said.split() == [
        *f"mlab-bench is at http://127.0.0.1:{port}/ (admin: http://127.0.0.1:{port}/admin/)".split(),
        *f"Ctrl-C stops everything; the processes' logs are in {var / 'log'}/".split(),
    ], said
    assert "Listening at" in (var / "log" / "web.log").read_text()
