"""A run's workspace as a sized filesystem: the kernel refuses the write that goes over the limit.

When the worker is root, a workspace is an overlay mount:

    <runs>/<run>/workspace-<attempt>         the workspace (overlay: what the agent and its code see)
    <runs>/<run>/.workspace-<attempt>.lower  the task's read-only files, hard-linked to their blobs (not counted)
    <runs>/<run>/.workspace-<attempt>.fs     a filesystem of the limit's size and inode count, holding the
                                             overlay's upper layer: every file the run writes or changes

so no walk, polling, depth, file count, sparseness or background thread can take the run past its limit: a write
over it fails with ENOSPC (or an inode limit's ENOSPC) in the script that made it. Deleting files still works, and
frees the space. ``remove_tree`` unmounts all of it. The sized filesystem is one of (``BENCH_WORKSPACE_FS``):

- ``ext4`` (the default for a root worker): an ext4 filesystem in a sparse image file on the runs folder's disk,
  ``<runs>/<run>/.workspace-<attempt>.img``, loop-mounted (``-o discard``: what the run deletes is punched out of
  the image again). What a run writes is on disk, not in the host's memory; the image costs only what is written
  (its inode table is never written out: ``noinit_itable``). About 40 ms to make and mount.
- ``tmpfs``: the upper layer in memory. As quick, but a host then holds what its runs wrote in RAM (or swap), up to
  each run's whole limit: size the host for the runs it holds.

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


FILESYSTEMS = ("ext4", "tmpfs", "none")


def support_paths(workspace: Path) -> tuple[Path, Path]:
    """The lower folder (read-only links) and the sized filesystem's mount point of a workspace."""
    workspace = Path(workspace)
    return workspace.parent / f".{workspace.name}.lower", workspace.parent / f".{workspace.name}.fs"


def image_path(workspace: Path) -> Path:
    """Where an ext4 workspace's image file is."""
    workspace = Path(workspace)
    return workspace.parent / f".{workspace.name}.img"


def _run(*args: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=MOUNT_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise WorkspaceMountError(f"{' '.join(args[:3])} failed: {done.stderr.strip()[:500]}")


def sized_mount(workspace: Path, *, limit_mb: int, max_files: int, filesystem: str = "ext4") -> Path:
    """Mount an empty sized workspace (overlay over an ext4 image or a tmpfs of ``limit_mb`` and ``max_files``
    inodes); the lower folder where read-only files are to be linked is returned, and the caller links them before
    any write."""
    workspace = Path(workspace)
    lower, sized = support_paths(workspace)
    for folder in (workspace, lower, sized):
        folder.mkdir(parents=True, exist_ok=True)
    try:
        if filesystem == "ext4":
            _ext4_mount(image_path(workspace), sized, limit_mb=limit_mb, max_files=max_files)
        else:
            options = f"size={limit_mb}m,nr_inodes={max_files},mode=0755"
            _run("mount", "-t", "tmpfs", "-o", options, "tmpfs", str(sized))
        (sized / "upper").mkdir()
        (sized / "work").mkdir()
    except (OSError, WorkspaceMountError) as exc:
        workspace_unmount(workspace)
        if isinstance(exc, WorkspaceMountError):
            raise
        raise WorkspaceMountError(f"the sized workspace could not be laid out: {exc}") from exc
    return lower


def _ext4_mount(image: Path, mount_point: Path, *, limit_mb: int, max_files: int) -> None:
    """An ext4 filesystem of ``limit_mb`` for data and ``max_files`` inodes in a sparse image, loop-mounted: no
    journal (a workspace is scratch: snapshots are its record), nothing reserved for root, 256-byte inodes (for
    nanosecond times, which the snapshots' racy-listing check reads), the inode table not written out."""
    with open(image, "wb") as fh:
        fh.truncate(limit_mb << 20)
    _run(
        "mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-m", "0", "-I", "256", "-N", str(max_files),
        "-E", "lazy_itable_init=1,nodiscard", str(image),
    )  # fmt: skip
    _run("mount", "-o", "loop,discard,noinit_itable,noatime,nosuid,nodev", str(image), str(mount_point))
    os.chmod(mount_point, 0o755)


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
    image_path(workspace).unlink(missing_ok=True)  # its loop device lets go once the lazy unmount is done


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
    """Lay out a snapshot as a run's workspace: on a sized filesystem (``filesystem`` "ext4" or "tmpfs") or a
    plain folder (``"none"``). Read-only files are hard-linked to their blobs where the sandbox keeps them safe; every
    other file is the sandbox user's, and on a sized filesystem counts against its limit."""
    if filesystem not in FILESYSTEMS:
        raise WorkspaceMountError(f"BENCH_WORKSPACE_FS={filesystem!r}: expected one of {', '.join(FILESYSTEMS)}")
    if filesystem == "none" or not limit_mb:
        snapshotter = manifest_restore(manifest, workspace, store, link=read_only if sandbox.protects_links else set())
        writable_for_sandbox(workspace, sandbox.ids, read_only=read_only)
        return snapshotter
    linked = {rel: entry for rel, entry in manifest.items() if rel in read_only}
    lower = sized_mount(workspace, limit_mb=limit_mb, max_files=max_files, filesystem=filesystem)
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
