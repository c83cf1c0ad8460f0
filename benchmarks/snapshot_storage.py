"""Snapshot storage and time per step: ours against MLAgentBench as its tasks configure it, three workspaces.

    data      10 files of 10 MB, read-only (listed as such), and train.py edited at every step
    many      10,000 files of 10 kB in 100 folders, read-only (listed), and train.py edited at every step
    outputs   20 MB of writable outputs (200 files of 100 kB) the run wrote, one of them rewritten per step

Ours: the task's files stored once (what preparing the task version does), the workspace laid out from them
(read-only files hard-linked to their blobs, as a root worker does), and after every step the snapshot a run
takes (``Snapshotter.take``, stored as a delta against the task's manifest). MLAgentBench: its Environment is not
on PyPI, so its per-step save is modelled as its code does it (``environment.py``, ``Environment.save``): walk the
workspace, and copy every file whose path is not in the read-only list (a Python list, as it builds it) into a
fresh ``traces/step_N_files/``. Both save after the same step, in alternating order; the workspace's size check
that follows each of our actions (``Environment.workspace_size_mb``) is timed apart. Bytes are apparent sizes
added by the run (ours: the blob store minus what preparing the task stored; theirs: the step folders).

    .venv/bin/python benchmarks/snapshot_storage.py [--steps 50] [--scenario data many outputs]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# A run's first action comes after its agent started and asked its model: seconds after the layout. The folders
# laid out are trusted unlisted only once they are older than a clock tick (snapshots.RACY_NS); wait that long.
FIRST_ACTION_AFTER_S = 0.2


def apparent_bytes(root: Path) -> int:
    """Apparent bytes of the files below root, each inode counted once (hard links are not double-counted)."""
    seen, total = set(), 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_size
    return total


def disk_bytes(root: Path) -> int:
    """Bytes on disk below root: the blocks of its files (each inode once) and of its folders, root's own included."""
    seen, total = set(), os.lstat(root).st_blocks * 512
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            st = os.lstat(os.path.join(dirpath, name))
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_blocks * 512
    return total


def stored_size(store, sha: str) -> int:
    """The bytes the blob's file takes (as stored, packed or not)."""
    path = store.path(sha)
    return (path if path.exists() else store.packed_path(sha)).stat().st_size


def train_py(step: int) -> str:
    return f"EPOCHS = {step + 2}\n" + "x = 1\n" * 200


def scenario_files(name: str) -> tuple[dict[str, bytes], set[str], dict[str, bytes]]:
    """(the task's env files, which of them are read-only, the outputs the run writes before its first step)."""
    env: dict[str, bytes] = {"train.py": train_py(-1).encode()}
    outputs: dict[str, bytes] = {}
    if name == "data":
        for i in range(10):
            env[f"data/part{i}.bin"] = os.urandom(10 * 1024 * 1024)
    elif name == "many":
        for i in range(10_000):
            env[f"data/d{i // 100:02d}/f{i % 100:02d}.bin"] = os.urandom(10 * 1024)
    elif name == "outputs":
        for i in range(200):
            outputs[f"outputs/o{i:03d}.bin"] = os.urandom(100 * 1024)
    read_only = {rel for rel in env if rel.startswith("data/")}
    return env, read_only, outputs


def step_edit(name: str, workspace: Path, step: int) -> None:
    if name == "outputs":
        (workspace / f"outputs/o{step % 200:03d}.bin").write_bytes(os.urandom(100 * 1024))
    else:
        (workspace / "train.py").write_text(train_py(step))


def mlagentbench_read_only(workspace: Path, read_only: set[str]) -> list[str]:
    """The read-only list as its Environment builds it: paths as os.walk joins them ('./x' at the top)."""
    listed = []
    for path, _dirs, files in os.walk(workspace):
        relpath = os.path.relpath(path, workspace)
        for name in files:
            rel = os.path.join(relpath, name)
            if os.path.normpath(rel) in read_only:
                listed.append(rel)
    return listed


def mlagentbench_save(workspace: Path, traces: Path, step: int, read_only: list[str]) -> None:
    """Its per-step save: every file not in the read-only list copied into a fresh step folder."""
    folder = traces / f"step_{step}_files"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for path, _dirs, files in os.walk(workspace):
        relpath = os.path.relpath(path, workspace)
        dest = folder / relpath
        for name in files:
            rel = os.path.join(relpath, name)
            if rel not in read_only:
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(workspace / rel, folder / rel)


def run_scenario(name: str, steps: int, root: Path) -> dict:
    from runner.actions import Environment
    from runner.execution.sandboxes import get_sandbox
    from runner.workspace.snapshots import BlobStore, manifest_restore

    env, read_only, outputs = scenario_files(name)
    store = BlobStore(root / "blobs")
    task_env = root / "task_env"
    for rel, data in env.items():
        (task_env / rel).parent.mkdir(parents=True, exist_ok=True)
        (task_env / rel).write_bytes(data)
    del env
    initial = {}
    for rel in sorted(p.relative_to(task_env).as_posix() for p in task_env.rglob("*") if p.is_file()):
        sha, size = store.put_file(task_env / rel, link=rel in read_only)
        initial[rel] = [sha, size]
    initial_sha = store.manifest_save(initial)
    after_prepare, on_disk_after_prepare = apparent_bytes(store.root), disk_bytes(store.root)

    workspace = root / "workspace"
    snapshotter = manifest_restore(initial, workspace, store, link=read_only)
    snapshotter.deltas_from(initial_sha, initial)
    for rel, data in outputs.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_bytes(data)
    traces = root / "mlagentbench" / "traces"
    traces.mkdir(parents=True)
    listed = mlagentbench_read_only(workspace, read_only)
    environment = Environment(workspace=workspace, sandbox=get_sandbox("local"), read_only_files=sorted(read_only))
    time.sleep(FIRST_ACTION_AFTER_S)

    ours_s = theirs_s = size_s = 0.0
    manifests: set[str] = set()
    for step in range(steps):
        step_edit(name, workspace, step)
        for who in ("ours", "theirs") if step % 2 == 0 else ("theirs", "ours"):
            started = time.perf_counter()
            if who == "ours":
                sha, _ = snapshotter.take()
                ours_s += time.perf_counter() - started
                manifests.add(sha)
                started = time.perf_counter()
                environment.workspace_size_mb()  # what every action is followed by, besides the snapshot
                size_s += time.perf_counter() - started
            else:
                mlagentbench_save(workspace, traces, step, listed)
                theirs_s += time.perf_counter() - started
    # Every step's full manifest, as every caller gets it, is the workspace as it is.
    assert store.manifest_load(sha) == snapshotter.take()[1]
    return {
        "ours_bytes": apparent_bytes(store.root) - after_prepare,
        "ours_disk": disk_bytes(store.root) - on_disk_after_prepare,
        "theirs_disk": disk_bytes(traces),
        "ours_manifest_bytes": sum(stored_size(store, sha) for sha in manifests - {initial_sha}),
        "theirs_bytes": apparent_bytes(traces),
        "ours_ms": ours_s * 1000 / steps,
        "theirs_ms": theirs_s * 1000 / steps,
        "size_ms": size_s * 1000 / steps,
        "workspace_bytes": apparent_bytes(workspace),
    }


def kb(n: int) -> str:
    return f"{n / 1e3:,.1f} kB" if n < 10e6 else f"{n / 1e6:,.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--scenario", nargs="*", default=["data", "many", "outputs"])
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    print(f"{args.steps} steps; MLAgentBench modelled (its Environment is not on PyPI): read-only data listed")
    print(
        f"{'scenario':<9} {'workspace':>10} | {'ours stored':>12} {'(manifests)':>12} {'MLAgentBench':>13} "
        f"{'theirs/ours':>11} | {'ours on disk':>12} {'theirs on disk':>14} {'theirs/ours':>11} | "
        f"{'ours ms/step':>12} {'theirs ms/step':>14} {'theirs/ours':>11} | {'size check ms':>13}"
    )
    for name in args.scenario:
        root = Path(tempfile.mkdtemp(prefix=f"snapbench-{name}-"))
        try:
            r = run_scenario(name, args.steps, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(
            f"{name:<9} {kb(r['workspace_bytes']):>10} | {kb(r['ours_bytes']):>12} {kb(r['ours_manifest_bytes']):>12} "
            f"{kb(r['theirs_bytes']):>13} {r['theirs_bytes'] / max(r['ours_bytes'], 1):>10.1f}x | "
            f"{kb(r['ours_disk']):>12} {kb(r['theirs_disk']):>14} "
            f"{r['theirs_disk'] / max(r['ours_disk'], 1):>10.1f}x | "
            f"{r['ours_ms']:>12.1f} {r['theirs_ms']:>14.1f} {r['theirs_ms'] / max(r['ours_ms'], 1e-9):>10.1f}x | "
            f"{r['size_ms']:>13.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
