"""Snapshot storage: a 50-step run in a workspace holding 20 MB of data, each step editing one small file.

The headline compares the bytes our content-addressed snapshots add for the run against MLAgentBench as its
tasks run: after every step it copies every file not listed read-only (the data is listed, so it is not copied).
Copying the whole workspace after every step, which neither does, is printed as context only.

    .venv/bin/python benchmarks/snapshot_storage.py [--steps 50] [--data-mb 20]
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


def disk_bytes(root: Path) -> int:
    """Bytes on disk below root, each inode counted once (hard links are not double-counted)."""
    seen, total = set(), 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_size
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--data-mb", type=int, default=20)
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    from runner.snapshots import BlobStore, manifest_restore

    root = Path(tempfile.mkdtemp(prefix="snapbench-"))
    try:
        store = BlobStore(root / "blobs")
        task_env = root / "task_env"
        (task_env / "data").mkdir(parents=True)
        for i in range(10):  # the task's data: 10 files, read-only for the agent
            (task_env / "data" / f"part{i}.bin").write_bytes(os.urandom(args.data_mb * 1024 * 1024 // 10))
        (task_env / "train.py").write_text("EPOCHS = 1\n" + "x = 1\n" * 200)
        read_only = {f"data/part{i}.bin" for i in range(10)}

        # What preparing the task stores once per task version (shared by every run of it).
        initial = {}
        for rel in sorted(read_only | {"train.py"}):
            sha, size = store.put_file(task_env / rel, link=rel in read_only)
            initial[rel] = [sha, size]
        store.manifest_save(initial)
        after_prepare = disk_bytes(store.root)

        workspace = root / "workspace"
        snapshotter = manifest_restore(initial, workspace, store, link=read_only)
        workspace_bytes = disk_bytes(workspace)
        non_read_only = sum(
            p.stat().st_size
            for p in workspace.rglob("*")
            if p.is_file() and p.relative_to(workspace).as_posix() not in read_only
        )
        started = time.perf_counter()
        mlagentbench_bytes = 0
        for step in range(args.steps):
            (workspace / "train.py").write_text(f"EPOCHS = {step + 2}\n" + "x = 1\n" * 200)
            snapshotter.take()
            mlagentbench_bytes += sum(
                p.stat().st_size
                for p in workspace.rglob("*")
                if p.is_file() and p.relative_to(workspace).as_posix() not in read_only
            )
        elapsed = time.perf_counter() - started
        run_bytes = disk_bytes(store.root) - after_prepare

        full_copy = workspace_bytes * args.steps
        ratio = run_bytes / max(mlagentbench_bytes, 1)
        print(
            f"workspace: {workspace_bytes / 1e6:.1f} MB ({non_read_only / 1e3:.1f} kB of it writable), "
            f"{args.steps} steps, one small file edited per step"
        )
        print(
            f"our snapshots, added by the run: {run_bytes / 1e3:.1f} kB; MLAgentBench, copying the writable files "
            f"after every step: {mlagentbench_bytes / 1e3:.1f} kB; ours is {ratio:.2f}x theirs "
            f"({'larger' if ratio > 1 else 'smaller'})"
        )
        print("context:")
        print(f"  task data stored once per task version: {after_prepare / 1e6:8.1f} MB (hard links, no copy)")
        print(f"  copying the whole workspace every step: {full_copy / 1e6:8.1f} MB (what neither does)")
        print(
            f"time to take {args.steps} snapshots: {elapsed * 1000:.0f} ms ({elapsed * 1000 / args.steps:.1f} ms each)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
