"""A step's stored snapshot holds what it changed, not the task's read-only files; every reader still gets the whole
workspace, and a resumed or forked run is laid out exactly as the step left it."""

import hashlib
import json
import os
import shutil
import textwrap
import time

import pytest

from runner.actions import Environment
from runner.execution import run_execute
from runner.execution.sandboxes import get_sandbox
from runner.models import Run, Step
from runner.services import run_create, run_fork
from runner.workspace.fs import RACY_NS, Listing
from runner.workspace.mounts import remove_tree, workspace_layout
from runner.workspace.snapshots import BlobStore, Snapshotter, manifest_restore
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, package_write

READ_ONLY_FILES = 1_000

# The workspace's digest as code in the sandbox sees it: every file's path and content, in path order.
CHECK_PY = """
import hashlib, os
paths = []
for folder, dirs, files in os.walk("."):
    dirs[:] = [d for d in dirs if d not in ("__pycache__", "backup")]
    paths += [os.path.relpath(os.path.join(folder, name), ".") for name in files]
digest = hashlib.sha256()
for rel in sorted(paths):
    digest.update(rel.encode() + b"\\0" + open(rel, "rb").read() + b"\\0")
print(len(paths), digest.hexdigest())
"""


def manifest_digest(manifest: dict, store: BlobStore) -> str:
    digest = hashlib.sha256()
    for rel in sorted(manifest):
        digest.update(rel.encode() + b"\0" + store.read_bytes(manifest[rel][0]) + b"\0")
    return f"{len(manifest)} {digest.hexdigest()}"


def many_files(root, count: int) -> set[str]:
    rels = set()
    for i in range(count):
        rel = f"data/d{i // 100:02d}/f{i % 100:03d}.txt"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"row {i}\n")
        rels.add(rel)
    return rels


def laid_out(tmp_path, count: int = 500) -> tuple[Snapshotter, BlobStore, str, set[str]]:
    """A workspace laid out as a run's: read-only files linked to their blobs, deltas against the task's manifest."""
    store = BlobStore(tmp_path / "blobs")
    task_env = tmp_path / "task_env"
    read_only = many_files(task_env, count)
    (task_env / "train.py").write_text("EPOCHS = 1\n")
    initial = {rel: list(store.put_file(task_env / rel, link=rel in read_only)) for rel in read_only | {"train.py"}}
    base = store.manifest_save(initial)
    snapshotter = manifest_restore(initial, tmp_path / "ws", store, link=read_only)
    snapshotter.deltas_from(base, initial)
    return snapshotter, store, base, read_only


def test_a_step_that_changes_one_file_stores_that_file_not_the_read_only_ones(tmp_path):
    snapshotter, store, base, read_only = laid_out(tmp_path, 2_000)
    assert len(store.read_bytes(base)) > 100_000  # the task's manifest lists every file once

    unchanged, _ = snapshotter.take()
    assert unchanged == base  # nothing changed: the step points at the task's manifest

    (snapshotter.workspace / "train.py").write_text("EPOCHS = 2\n")
    sha, manifest = snapshotter.take()
    assert len(store.read_bytes(sha)) < 300  # the one file changed, whatever the workspace holds
    assert store.manifest_load(sha) == manifest and len(manifest) == 2_001
    assert store.read_bytes(manifest["train.py"][0]) == b"EPOCHS = 2\n"

    (snapshotter.workspace / "data/d03/f007.txt").unlink()
    sha, manifest = snapshotter.take()
    assert "data/d03/f007.txt" not in store.manifest_load(sha) and len(store.read_bytes(sha)) < 300


def test_a_manifest_stored_whole_before_deltas_still_loads(tmp_path):
    store = BlobStore(tmp_path / "blobs")
    blob = store.put_bytes(b"x")
    old = store.put_bytes(json.dumps({"base": [blob, 1], "removed": [blob, 1]}).encode())  # files named like the header
    assert store.manifest_load(old) == {"base": [blob, 1], "removed": [blob, 1]}


def test_a_folder_of_read_only_files_is_looked_at_again_when_its_entries_change(tmp_path):
    snapshotter, store, base, read_only = laid_out(tmp_path)
    time.sleep(RACY_NS / 1e9 * 2)  # the folders laid out are older than a clock tick: their listings are trusted
    snapshotter.take()
    folder = snapshotter.workspace / "data/d02"

    (folder / "added.txt").write_text("new\n")  # the sandbox may create files in any folder
    _, manifest = snapshotter.take()
    assert store.read_bytes(manifest["data/d02/added.txt"][0]) == b"new\n"

    os.rename(folder / "f001.txt", folder / "moved.txt")
    (folder / "f001.txt").write_text("replaced\n")
    sha, manifest = snapshotter.take()
    assert store.read_bytes(manifest["data/d02/f001.txt"][0]) == b"replaced\n"
    assert store.read_bytes(manifest["data/d02/moved.txt"][0]) == b"row 201\n"

    nested = snapshotter.workspace / "data/d04/deeper"
    nested.mkdir()
    (nested / "x.txt").write_text("x\n")
    _, manifest = snapshotter.take()
    assert "data/d04/deeper/x.txt" in manifest
    assert (
        store.manifest_load(snapshotter.take()[0])
        == manifest
        == {
            p.relative_to(snapshotter.workspace).as_posix(): manifest.get(
                p.relative_to(snapshotter.workspace).as_posix()
            )
            for p in snapshotter.workspace.rglob("*")
            if p.is_file()
        }
    )


def test_a_folder_listed_within_a_clock_tick_of_its_last_change_is_listed_again():
    # A change made later in the same tick would leave the folder's ctime as it was: such a listing proves nothing.
    ctime = 1_700_000_000_000_000_000
    key = (1, 2, ctime, ctime)
    assert not Listing(key, ctime + RACY_NS // 2, [], []).still_true(key)
    assert Listing(key, ctime + RACY_NS + 1, [], []).still_true(key)
    assert not Listing(key, ctime + RACY_NS + 1, [], []).still_true((1, 2, ctime, ctime + 1))


@pytest.mark.skipif(shutil.which("bwrap") is None or os.geteuid() != 0, reason="a root worker's bwrap sandbox")
@pytest.mark.parametrize("filesystem", ["ext4", "tmpfs", "none"])
def test_a_file_sandboxed_code_plants_among_read_only_files_is_in_the_next_snapshot(tmp_path, filesystem):
    store = BlobStore(tmp_path / "blobs")
    read_only = many_files(tmp_path / "src", 300)
    (tmp_path / "src" / "train.py").write_text("EPOCHS = 1\n")
    initial = {rel: list(store.put_file(tmp_path / "src" / rel, link=rel in read_only)) for rel in read_only}
    initial["train.py"] = list(store.put_file(tmp_path / "src" / "train.py"))
    box = get_sandbox("bwrap")
    workspace = tmp_path / "run" / "workspace-1"
    snapshotter = workspace_layout(
        initial, workspace, store, read_only=read_only, sandbox=box, filesystem=filesystem, limit_mb=20,
        max_files=1_000,
    )  # fmt: skip
    snapshotter.deltas_from(store.manifest_save(initial), initial)
    env = Environment(workspace=workspace, sandbox=box, python=box.python, read_only_files=sorted(read_only))
    try:
        time.sleep(RACY_NS / 1e9 * 2)
        assert snapshotter.take()[1] == initial  # the folders are listed, and trusted from now on
        plant = (
            "import os\n"
            "st = os.stat('data/d01')\n"
            "open('data/d01/planted.txt', 'w').write('planted')\n"
            "try:\n"
            "    os.utime('data/d01', ns=(st.st_atime_ns, st.st_mtime_ns))\n"
            "except OSError as exc:\n"
            "    print('utime refused:', exc.errno)\n"
            "print('done')\n"
        )
        (workspace / "plant.py").write_text(plant)
        assert "done" in env.execute("Execute Script", {"script_name": "plant.py"}).observation

        _, after = snapshotter.take(full=env.sandbox_may_have_written())

        assert store.read_bytes(after["data/d01/planted.txt"][0]) == b"planted"
        assert {rel: after[rel] for rel in initial} == initial

        # The workspace's size, checked after every action, skips the same folders' read-only files, never the others.
        time.sleep(RACY_NS / 1e9 * 2)
        assert env.workspace_size_mb() < 1  # d01 listed with planted.txt in it: trusted from now on
        grow = "open('data/d01/planted.txt', 'ab').write(b'x' * (3 << 20))\nprint('grown')\n"
        (workspace / "grow.py").write_text(grow)
        assert "grown" in env.execute("Execute Script", {"script_name": "grow.py"}).observation
        assert env.workspace_size_mb() >= 3
    finally:
        env.close()
        remove_tree(workspace)


CHECK_SCRIPT = [
    {"type": "act", "action": "Write File", "input": {"file_name": "value.txt", "content": "5"}},
    {"type": "act", "action": "Execute Script", "input": {"script_name": "check.py"}},
    {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
]


@pytest.fixture
def many_task(db, tmp_path):
    """The tiny task with 1,000 read-only data files that prepare.py writes, and a script that digests the workspace."""
    files = dict(TINY_FILES)
    files["scripts/read_only_files.txt"] = "data.txt\ndata/*\n"
    files["scripts/prepare.py"] = textwrap.dedent(TINY_FILES["scripts/prepare.py"]) + (
        "import os\n"
        f"for i in range({READ_ONLY_FILES}):\n"
        "    os.makedirs(f'../env/data/d{i // 100:02d}', exist_ok=True)\n"
        "    open(f'../env/data/d{i // 100:02d}/f{i % 100:03d}.txt', 'w').write(f'row {i}\\n')\n"
    )
    files["env/check.py"] = CHECK_PY
    version, _ = task_import(root=package_write(tmp_path / "many", files), slug="many")
    return version


@pytest.mark.django_db(transaction=True)
def test_in_a_run_the_step_stores_its_change_and_a_fork_or_resume_lays_out_the_exact_workspace(many_task):
    store = BlobStore()
    agent = AgentFactory(config={"script": CHECK_SCRIPT})
    run = run_execute(run_create(task=many_task.task, agent=agent, enqueue=False).pk)
    assert run.status == "finished", run.error
    write, check, _final = Step.objects.filter(run=run).order_by("index")
    written = store.manifest_load(write.snapshot)
    assert len(written) > READ_ONLY_FILES and store.read_bytes(written["value.txt"][0]) == b"5"
    assert len(store.read_bytes(write.snapshot)) < 1_000  # value.txt, not the 1,000 read-only files
    assert len(store.read_bytes(run.initial_snapshot)) > 50_000
    expected = manifest_digest(written, store)
    assert check.observation.splitlines()[-1] == expected  # the manifest is the workspace the sandbox saw

    fork = run_execute(run_fork(run=run, step_index=0).pk)  # acts again from step 1, in step 0's workspace
    assert fork.status == "finished", fork.error
    assert Step.objects.get(run=fork, index=1).observation.splitlines()[-1] == expected

    # Resumed: a run whose attempt ended after step 0 is taken up again by a new attempt.
    agent.config = {"script": [*CHECK_SCRIPT[:1], {"exit": 3, "stderr": "stopped"}]}
    agent.save()
    resumed = run_execute(run_create(task=many_task.task, agent=agent, enqueue=False).pk)
    assert list(resumed.steps.values_list("action", flat=True)) == ["Write File"]
    Run.objects.filter(pk=resumed.pk).update(status=Run.Status.QUEUED, ending=None, final_snapshot="", error="")
    agent.config = {"script": CHECK_SCRIPT}
    agent.save()
    resumed = run_execute(resumed.pk)
    assert resumed.status == "finished" and resumed.attempt == 2, resumed.error
    assert Step.objects.get(run=resumed, index=1).observation.splitlines()[-1] == expected
