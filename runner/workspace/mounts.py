"""A run's workspace as a sized filesystem: the kernel refuses the write that goes over the limit.

When the worker is root (``BENCH_WORKSPACE_FS=tmpfs``, the default then), a workspace is an overlay mount:

    <runs>/<run>/workspace-<attempt>         the workspace (overlay: what the agent and its code see)
    <runs>/<run>/.workspace-<attempt>.lower  the task's read-only files, hard-linked to their blobs (not counted)
    <runs>/<run>/.workspace-<attempt>.fs     a tmpfs of the limit's size and inode count, holding the overlay's
                                             upper layer: every file the run writes or changes

so no walk, polling, depth, file count, sparseness or background thread can take the run past its limit: a write
over it fails with ENOSPC (or an inode limit's ENOSPC) in the script that made it. Deleting files still works, and
frees the space. ``remove_tree`` unmounts all of it. tmpfs pages are memory: a host holds what its runs wrote in
their workspaces in RAM (or swap), so size it for the runs it holds.

Where mounting is impossible (a worker that is not root, ``BENCH_WORKSPACE_FS=none``), the workspace is a plain
folder and the environment counts its allocated blocks after every action instead (``Environment.over_limit``).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

from ..sandbox.identity import writable_for_sandbox
from .snapshots import BlobStore, Manifest, Snapshotter, manifest_restore

log = logging.getLogger(__name__)

MOUNT_TIMEOUT_S = 60


class WorkspaceMountError(Exception):
    """The sized filesystem could not be set up (an infrastructure failure, not the agent's)."""


def support_paths(workspace: Path) -> tuple[Path, Path]:
    """The lower folder (read-only links) and the sized filesystem's mount point of a workspace."""
    workspace = Path(workspace)
    return workspace.parent / f".{workspace.name}.lower", workspace.parent / f".{workspace.name}.fs"


def _run(*args: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=MOUNT_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise WorkspaceMountError(f"{' '.join(args[:3])} failed: {done.stderr.strip()[:500]}")


def sized_mount(workspace: Path, *, limit_mb: int, max_files: int) -> Path:
    """Mount an empty sized workspace (overlay over a tmpfs of ``limit_mb`` and ``max_files`` inodes); the lower
    folder where read-only files are to be linked is returned, and the caller links them before any write."""
    workspace = Path(workspace)
    lower, sized = support_paths(workspace)
    for folder in (workspace, lower, sized):
        folder.mkdir(parents=True, exist_ok=True)
    _run("mount", "-t", "tmpfs", "-o", f"size={limit_mb}m,nr_inodes={max_files},mode=0755", "tmpfs", str(sized))
    try:
        (sized / "upper").mkdir()
        (sized / "work").mkdir()
    except OSError as exc:
        workspace_unmount(workspace)
        raise WorkspaceMountError(f"the sized workspace could not be laid out: {exc}") from exc
    return lower


def overlay_mount(workspace: Path) -> None:
    lower, sized = support_paths(workspace)
    options = f"lowerdir={lower},upperdir={sized / 'upper'},workdir={sized / 'work'}"
    try:
        _run("mount", "-t", "overlay", "overlay", "-o", options, str(workspace))
    except WorkspaceMountError:
        workspace_unmount(workspace)
        raise


def is_mounted(path: Path) -> bool:
    return os.path.ismount(path)


def workspace_unmount(workspace: Path) -> None:
    """Unmount a sized workspace (the overlay, then its tmpfs) and remove its support folders; a plain folder
    is left alone. Lazy unmounts: a process still inside cannot keep the mount."""
    workspace = Path(workspace)
    lower, sized = support_paths(workspace)
    for mount_point in (workspace, sized):
        if is_mounted(mount_point):
            done = subprocess.run(
                ["umount", "--lazy", str(mount_point)], capture_output=True, timeout=MOUNT_TIMEOUT_S, check=False
            )
            if done.returncode != 0:
                log.warning("could not unmount %s: %s", mount_point, done.stderr[:300])
    for folder in (lower, sized):
        if folder.exists() and not is_mounted(folder):
            subprocess.run(["rm", "-rf", "--one-file-system", "--", str(folder)], check=False, timeout=600)


def workspace_layout(
    manifest: Manifest,
    workspace: Path,
    store: BlobStore,
    *,
    read_only: set[str],
    sandbox,
    filesystem: str,
    limit_mb: int,
    max_files: int,
) -> Snapshotter:
    """Lay out a snapshot as a run's workspace: on a sized filesystem (``filesystem="tmpfs"``) or a plain folder
    (``"none"``). Read-only files are hard-linked to their blobs where the sandbox keeps them safe; every other
    file is the sandbox user's, and on a sized filesystem counts against its limit."""
    if filesystem == "none" or not limit_mb:
        snapshotter = manifest_restore(manifest, workspace, store, link=read_only if sandbox.protects_links else set())
        writable_for_sandbox(workspace, sandbox.ids, read_only=read_only)
        return snapshotter
    if filesystem != "tmpfs":
        raise WorkspaceMountError(f"BENCH_WORKSPACE_FS={filesystem!r}: expected tmpfs or none")
    linked = {rel: entry for rel, entry in manifest.items() if rel in read_only}
    lower = sized_mount(workspace, limit_mb=limit_mb, max_files=max_files)
    manifest_restore(linked, lower, store, link=set(linked) if sandbox.protects_links else set())
    overlay_mount(workspace)
    try:
        rest = {rel: entry for rel, entry in manifest.items() if rel not in read_only}
        snapshotter = manifest_restore(rest, workspace, store)
    except OSError as exc:
        raise WorkspaceMountError(f"the snapshot does not fit the workspace's {limit_mb} MB: {exc}") from exc
    snapshotter.protected = frozenset(linked) if sandbox.protects_links else frozenset()
    for rel, (sha, _size) in linked.items():
        snapshotter.remember(rel, sha)
    writable_for_sandbox(workspace, sandbox.ids, read_only=read_only)
    return snapshotter


def remove_tree(path: Path) -> None:
    """Remove a folder whatever a sandboxed process left in it (links, deep nesting, odd permissions)."""
    path = Path(path)
    workspace_unmount(path)  # a sized workspace: its mounts go first
    if not path.exists() and not path.is_symlink():
        return
    try:
        shutil.rmtree(path)
    except (OSError, RecursionError):
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], check=False, timeout=600)
