"""A worker that is not root, executing real runs. CI runs as root, so the path an unprivileged deployment takes
would otherwise never run: sandboxes in a user namespace of the worker's own uid, the task's read-only files
copied into the workspace (not hard-linked to shared blobs) and protected only by read-only mounts, and a
workspace that is a plain folder whose size is counted instead of a sized filesystem.

The test imports the isolation run's task and agent, hands the data folder to nobody (uid 65534), and starts
``manage.py bench_run --inline`` as nobody against the test database. The scripted agent searches its sandboxes
for the hidden files and the secrets planted around the host, tries every way to overwrite ``data.txt``, reports
how its workspace is mounted, and writes past the workspace limit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from runner.models import Run, Step
from runner.workspace.snapshots import BlobStore
from tests.factories import AgentFactory
from tests.integration.conftest import ROOT, service_env, shared_database_url
from tests.runner.sandbox.test_isolation_runs import (  # noqa: F401 - outside is a fixture
    DATA,
    OVERWRITE,
    act,
    isolation_task,
    outside,
    search_script,
)

pytestmark = pytest.mark.integration

NOBODY = (65534, 65534)
LIMIT_MB = 5
SETPRIV = shutil.which("setpriv")
ENV = shutil.which("env") or "/usr/bin/env"

# What the sandbox shows of itself: the copy's link count, the user namespace's uid map, the workspace's mount.
WHERE = r"""
import os
print("LINKS", os.stat("data.txt").st_nlink)
print("UIDMAP", " ".join(open("/proc/self/uid_map").read().split()))
with open("/proc/self/mountinfo") as fh:
    mounts = [line.split() for line in fh]
here = [m for m in mounts if m[4] == os.getcwd()][-1]
print("WORKSPACE", here[3], here[here.index("-") + 1])
"""

# Writes 1 MB every 50 ms up to 400 MB: far past the limit long before it could finish.
FILL = r"""
import time
with open("fill.bin", "wb") as fh:
    for written in range(1, 401):
        fh.write(b"x" * (1 << 20))
        fh.flush()
        time.sleep(0.05)
print("FILLED", written)
"""


def as_nobody(*argv: str) -> list[str]:
    """argv as nobody. Through env: setpriv may still hold root's capabilities while it looks up the program,
    so a program only root can reach would start; env looks it up as nobody."""
    return [SETPRIV, f"--reuid={NOBODY[0]}", f"--regid={NOBODY[1]}", "--clear-groups", ENV, "--", *argv]


@pytest.fixture
def nobody_python() -> tuple[str, dict[str, str]]:
    """An interpreter nobody can run this checkout with, and the environment it needs: this one, or, where this
    one lies out of nobody's reach (a venv made from an interpreter in root's home), the system's interpreter of
    the same version with this venv's packages on its path. Skipped where users cannot be switched; failed where
    neither works (CI must then make one readable: skipping would prove nothing)."""
    if os.geteuid() != 0 or SETPRIV is None or shutil.which("bwrap") is None:
        pytest.skip("needs root (to start a process as nobody), setpriv and bubblewrap")
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [(sys.executable, {}), (system, {"PYTHONPATH": sysconfig.get_paths()["purelib"]})]
    probe = "import django, runner, os; print(os.getuid(), runner.__file__)"
    failures = []
    for python, extra in candidates:
        done = subprocess.run(
            as_nobody(python, "-c", probe),
            cwd=ROOT,
            env={**os.environ, **extra},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode == 0:
            assert done.stdout.split() == [str(NOBODY[0]), str(ROOT / "runner" / "__init__.py")], done.stdout
            return python, extra
        failures.append(f"{python}: {done.stderr.strip()[-500:]}")
    pytest.fail("nobody cannot run this checkout with any interpreter:\n" + "\n".join(failures))


def chown_tree(root: Path, ids: tuple[int, int]) -> None:
    os.chown(root, *ids)
    for folder, subfolders, names in os.walk(root):
        for name in subfolders + names:
            os.chown(os.path.join(folder, name), *ids, follow_symlinks=False)


def bench_run_as_nobody(nobody_python, data: Path, *, agent, task: str, **env_extra: str):
    """``manage.py bench_run --inline`` as nobody, with ``data`` (handed to nobody) as its var folder."""
    chown_tree(data, NOBODY)  # the unprivileged worker's var folder: its task data, blobs and runs
    env = service_env(
        DATABASE_URL=shared_database_url(),
        BENCH_VAR_DIR=str(data),
        BENCH_SANDBOX="bwrap",
        BENCH_WORKSPACE_LIMIT_MB=str(LIMIT_MB),
        HOME="/nonexistent",
        **nobody_python[1],
    )
    env.pop("BENCH_WORKSPACE_FS", None)  # what an unprivileged worker chooses by itself, unless told
    env.update(env_extra)
    command = as_nobody(
        nobody_python[0],
        "manage.py",
        "bench_run",
        "--inline",
        "--agent",
        agent.name,
        "--task",
        task,
        "--max-steps",
        "20",
    )
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.django_db(transaction=True)
def test_an_unprivileged_worker_scores_a_run_that_cannot_read_hidden_files_overwrite_data_or_outgrow_its_limit(
    nobody_python,
    outside,  # noqa: F811 - the fixture imported above
    settings,
):
    data = outside["data"]
    hidden = f"HIDDEN-{outside['token']}"
    version = isolation_task(data / "package-src", hidden)
    needles = [f"{hidden}-package", f"{hidden}-prepared"] + [secret for _, secret in outside["secrets"].values()]
    search = search_script(needles)
    script = [
        {"probe": "exec(" + repr(search.replace("file=OUT", "file=__import__('sys').stderr")) + ")"},
        act("Write File", file_name="search.py", content=search.replace("file=OUT", "file=__import__('sys').stdout")),
        act("Execute Script", script_name="search.py"),  # step 1
        act("Write File", file_name="overwrite.py", content='READ_ONLY = ["data.txt"]\n' + OVERWRITE),
        act("Execute Script", script_name="overwrite.py"),  # step 3
        act("Write File", file_name="data.txt", content="overwritten"),  # step 4
        act("Write File", file_name="where.py", content=WHERE),
        act("Execute Script", script_name="where.py"),  # step 6
        act("Write File", file_name="fill.py", content=FILL),
        act("Execute Script", script_name="fill.py"),  # step 8
        act("Write File", file_name="clean.py", content="import os\nos.remove('fill.bin')\nprint('REMOVED')\n"),
        act("Execute Script", script_name="clean.py"),  # step 10
        act("Write File", file_name="value.txt", content="2.0"),
        act("Final Answer", final_answer="done"),
    ]
    agent = AgentFactory(config={"script": script})
    done = bench_run_as_nobody(nobody_python, data, agent=agent, task=version.task.slug)
    assert done.returncode == 0, done.stderr[-3000:]

    # Executed by nobody: the run's folders are nobody's, and its sandboxes were user namespaces of that uid alone.
    version.refresh_from_db()
    assert version.status == "ready", version.validation_log  # validated by the same worker, as nobody
    run = Run.objects.get(pk=json.loads(done.stdout.splitlines()[0])["run"])
    steps = {s.index: s for s in Step.objects.filter(run=run)}
    assert run.status == Run.Status.FINISHED, (run.error, [s.observation[:300] for s in steps.values()])
    assert run.worker == "inline"
    assert (Path(settings.BENCH_RUNS_DIR) / str(run.pk)).stat().st_uid == NOBODY[0]
    where = steps[6].observation
    inside, _, count = where.split("UIDMAP ", 1)[1].split()[:3]  # a root worker's sandbox: "0 0 4294967295"
    assert (inside, count) == (str(NOBODY[0]), "1"), where

    # The hidden files and the host's secrets: found by neither the script nor the agent's own process.
    seen = json.loads(steps[1].observation.split("SEARCH ", 1)[1].splitlines()[0])
    assert seen["found"] == [], f"a sandboxed script read {seen['found']}"
    assert seen["files"] > 0
    agent_line = next(line for line in run.stderr_tail.splitlines() if "SEARCH " in line)
    agent_seen = json.loads(agent_line.split("SEARCH ", 1)[1])
    assert agent_seen["found"] == [], f"the agent's process read {agent_seen['found']}"
    assert "workspace" not in agent_seen["top"]

    # The read-only file: a copy of its own (not the shared blob), bound read-only, every way to change it refused.
    tried = steps[3].observation
    assert "OVERWROTE" not in tried, tried
    assert tried.count("refused data.txt") == 7 and f"CONTENT {DATA!r}" in tried, tried
    assert "MOUNTED data.txt read-only" in tried
    assert "read-only" in steps[4].observation
    assert "LINKS 1\n" in where, where

    # The workspace is a plain folder bound into the sandbox, not a sized filesystem of its own.
    mount_root, fstype = where.split("WORKSPACE ", 1)[1].split()[:2]
    assert mount_root.endswith(f"/runs/{run.pk}/workspace-1") and fstype not in ("overlay", "tmpfs"), where

    # Writes over the limit: the script is stopped (its blocks counted), and deleting still works.
    filled = steps[8].observation
    assert "FILLED" not in filled and f"over its limit of {LIMIT_MB} MB" in filled, filled
    assert "did not finish" in filled
    assert "REMOVED" in steps[10].observation

    store = BlobStore()
    final = store.manifest_load(run.final_snapshot)
    assert store.read_bytes(final["data.txt"][0]).decode() == DATA
    assert "fill.bin" not in final and "data.txt.moved" not in final
    assert run.final_score == 2.0


@pytest.mark.django_db(transaction=True)
def test_a_worker_told_to_mount_sized_workspaces_that_cannot_is_a_worker_failure_not_the_tasks(
    nobody_python,
    outside,  # noqa: F811 - the fixture imported above
):
    """nobody cannot mount: with BENCH_WORKSPACE_FS=tmpfs set all the same, the baseline's run fails as an
    infrastructure failure, the task version waits for another validation (it is not failed: nothing was learnt
    about it), and the benchmark run that needed the validation says why it could not run."""
    version = isolation_task(outside["data"] / "package-src", f"HIDDEN-{outside['token']}")
    agent = AgentFactory(config={"script": [act("Final Answer", final_answer="done")]})

    done = bench_run_as_nobody(
        nobody_python, outside["data"], agent=agent, task=version.task.slug, BENCH_WORKSPACE_FS="tmpfs"
    )

    assert done.returncode == 0, done.stderr[-3000:]
    version.refresh_from_db()
    assert version.status == "pending", version.validation_log
    assert "a failure of the worker and not of the task" in version.validation_log
    assert "mount" in version.validation_log
    validation = Run.objects.get(task_version=version, purpose=Run.Purpose.VALIDATION, status=Run.Status.FAILED)
    assert validation.failure_kind == Run.FailureKind.INFRASTRUCTURE
    run = Run.objects.get(pk=json.loads(done.stdout.splitlines()[0])["run"])
    assert (run.status, run.failure_kind) == (Run.Status.FAILED, Run.FailureKind.INFRASTRUCTURE)
    assert "could not be validated" in run.error and "mount" in run.error
