"""Snapshots: unchanged files cost nothing, read-only data is referenced, any step can be restored."""

import os

import pytest

from runner.execution import run_execute
from runner.execution.sandboxes import sandbox_config
from runner.models import Step
from runner.sandbox import Limits
from runner.services import run_create
from runner.workspace import fs
from runner.workspace.mounts import remove_tree
from runner.workspace.snapshots import BlobStore, Snapshotter, manifest_restore
from tests.factories import AgentFactory


def run_script(env, source: str, name: str = "attempt.py"):
    (env.workspace / name).write_text(source)
    os.chown(env.workspace / name, *(sandbox_config().ids or (os.getuid(), os.getgid())))
    return env.execute("Execute Script", {"script_name": name})


def stored_bytes(store: BlobStore) -> int:
    return sum(p.stat().st_size for p in store.root.rglob("*") if p.is_file())


def test_a_step_stores_only_what_it_changed(tmp_path):
    store = BlobStore(tmp_path / "blobs")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "data.bin").write_bytes(os.urandom(1 << 20))
    (workspace / "train.py").write_text("EPOCHS = 1\n")
    snapshotter = Snapshotter(workspace, store)

    first, manifest = snapshotter.take()
    assert set(manifest) == {"data.bin", "train.py"}
    after_first = stored_bytes(store)
    assert after_first > 1 << 20

    again, _ = snapshotter.take()
    assert again == first and stored_bytes(store) == after_first  # nothing changed, nothing stored

    (workspace / "train.py").write_text("EPOCHS = 10\n")
    second, manifest2 = snapshotter.take()
    assert second != first and manifest2["data.bin"] == manifest["data.bin"]
    assert stored_bytes(store) - after_first < 1000  # the new train.py and a manifest, not the 1 MB again


def test_any_snapshot_restores_and_read_only_data_is_linked_not_copied(tmp_path):
    store = BlobStore(tmp_path / "blobs")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "data.bin").write_bytes(b"x" * 100_000)
    (workspace / "train.py").write_text("v1\n")
    snapshotter = Snapshotter(workspace, store)
    first, manifest1 = snapshotter.take()
    (workspace / "train.py").write_text("v2\n")
    (workspace / "new.txt").write_text("added\n")
    snapshotter.take()

    copies = [tmp_path / "restore-a", tmp_path / "restore-b"]
    for dest in copies:
        manifest_restore(store.manifest_load(first), dest, store, link={"data.bin"})
    for dest in copies:
        assert sorted(p.name for p in dest.iterdir()) == ["data.bin", "train.py"]
        assert (dest / "train.py").read_text() == "v1\n"
    blob = store.path(manifest1["data.bin"][0])
    assert (copies[0] / "data.bin").stat().st_ino == blob.stat().st_ino == (copies[1] / "data.bin").stat().st_ino
    assert (copies[0] / "train.py").stat().st_ino != (copies[1] / "train.py").stat().st_ino  # writable: a copy


def test_a_manifest_path_that_leaves_the_folder_is_refused(tmp_path):
    store = BlobStore(tmp_path / "blobs")
    sha = store.put_bytes(b"evil")
    with pytest.raises(ValueError, match="leaves the workspace"):
        manifest_restore({"../outside.txt": [sha, 4]}, tmp_path / "dest", store)
    assert not (tmp_path / "outside.txt").exists()


@pytest.mark.django_db(transaction=True)
def test_in_a_run_a_step_that_changes_nothing_points_at_the_previous_snapshot(tiny_task):
    script = [
        {"type": "act", "action": "Write File", "input": {"file_name": "value.txt", "content": "5"}},
        {"type": "act", "action": "List Files", "input": {"dir_path": "."}},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]
    run = run_execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)

    assert run.status == "finished", run.error
    write, listing, final = Step.objects.filter(run=run).order_by("index")
    assert write.snapshot != run.initial_snapshot
    assert listing.snapshot == write.snapshot == final.snapshot
    assert len(write.snapshot) == 64


def test_deep_nesting_is_an_error_for_snapshots_never_a_silent_cut_and_cleanup_still_works(make_env):
    env = make_env(limits=Limits(file_size_mb=10), workspace_limit_mb=0)
    run_script(
        env,
        "import os\nopen('top.txt', 'w').write('y')\nfor i in range(1200):\n    os.mkdir('d')\n    os.chdir('d')\n"
        "open('deep.txt', 'w').write('x')\nprint('nested')",
    )
    with pytest.raises(fs.WalkLimitError, match="nested more than 64 deep"):
        Snapshotter(env.workspace, BlobStore()).take()  # the deep file would be missing from a partial snapshot
    remove_tree(env.workspace)
    assert not env.workspace.exists()


def test_a_compressible_file_is_stored_packed_and_restores_exactly_copied_or_linked(tmp_path):
    store = BlobStore(tmp_path / "blobs")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = "".join(f"print('line {i}')\n" for i in range(2_000)).encode()
    (workspace / "train.py").write_bytes(script)
    (workspace / "noise.bin").write_bytes(os.urandom(50_000))  # zlib cannot shrink it: stored as it is
    _, manifest = Snapshotter(workspace, store).take()

    assert stored_bytes(store) < 50_000 + len(script) // 4
    assert store.read_bytes(manifest["train.py"][0]) == script
    copied = manifest_restore(manifest, tmp_path / "copied", store)
    assert (tmp_path / "copied" / "train.py").read_bytes() == script
    assert copied.take()[1] == manifest

    manifest_restore(manifest, tmp_path / "linked", store, link={"train.py"})  # read-only data is linked, packed or not
    linked = tmp_path / "linked" / "train.py"
    assert linked.read_bytes() == script and linked.stat().st_ino == store.path(manifest["train.py"][0]).stat().st_ino


def test_a_workspace_without_a_size_limit_is_not_walked_while_a_script_runs(make_env):
    # 0 is no limit, as for the warning after each action: a script that runs for seconds is neither walked nor
    # stopped over "a limit of 0 MB" (a folder too deep to walk would otherwise end it mid-run).
    env = make_env(limits=Limits(file_size_mb=10), workspace_limit_mb=0)
    outcome = run_script(env, "import time\nopen('out.txt', 'w').write('x' * 100_000)\ntime.sleep(3)\nprint('slept')")
    assert "slept" in outcome.observation and "over its limit" not in outcome.observation, outcome.observation
