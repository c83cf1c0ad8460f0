"""Content-addressed workspace snapshots.

A blob is a file stored once under its sha256. A snapshot is a manifest ``{path: [sha256, size]}``, itself
stored as a blob, so a step that changed nothing points at the same manifest as the step before it and a
file that did not change costs nothing. Blobs are read-only; workspaces may hard-link read-only files to
them, so large task data is referenced, never copied per run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from . import fs
from .sandbox.identity import writable_for_sandbox

Manifest = dict[str, list]  # path -> [sha256, size]
SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints"}


class BlobStore:
    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root or settings.BENCH_BLOB_DIR)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, sha: str) -> Path:
        return self.root / sha[:2] / sha[2:]

    def has(self, sha: str) -> bool:
        return self.path(sha).exists()

    def _commit(self, tmp: Path, sha: str) -> None:
        dest = self.path(sha)
        dest.parent.mkdir(exist_ok=True)
        os.chmod(tmp, 0o444)
        os.replace(tmp, dest)

    def put_bytes(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        if not self.has(sha):
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            self._commit(Path(tmp), sha)
        return sha

    def put_file(self, path: Path, *, link: bool = False) -> tuple[str, int]:
        """Store a file; with ``link`` an immutable source is hard-linked instead of copied."""
        return self._put(os.open(path, os.O_RDONLY | os.O_CLOEXEC), link_from=path if link else None)

    def put_fd(self, fd: int) -> tuple[str, int]:
        """Store the content of an open file descriptor (it is closed)."""
        return self._put(fd, link_from=None)

    def _put(self, fd: int, *, link_from: Path | None) -> tuple[str, int]:
        """Hash fd (closed afterwards) while copying it to a temporary blob in bounded chunks, holes kept holes
        (a sparse file makes a sparse blob); with link_from, hard-link that file instead."""
        link = link_from is not None
        digest = hashlib.sha256()
        size = 0
        out, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        try:
            try:
                for offset, data in fs.chunks(fd):
                    digest.update(fs.ZEROS if data is None else data)
                    size = offset + (fs.CHUNK if data is None else len(data))
                    if not link and data is not None and data != fs.ZEROS[: len(data)]:
                        os.lseek(out, offset, os.SEEK_SET)
                        view = memoryview(data)
                        while view:
                            view = view[os.write(out, view) :]
                if not link:
                    os.ftruncate(out, size)
            finally:
                os.close(fd)
                os.close(out)
            sha = digest.hexdigest()
            if self.has(sha):
                os.unlink(tmp)
            elif link:
                os.unlink(tmp)
                try:
                    os.link(link_from, tmp)
                except OSError:
                    shutil.copyfile(link_from, tmp)
                self._commit(Path(tmp), sha)
            else:
                self._commit(Path(tmp), sha)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return sha, size

    def hash_fd(self, fd: int) -> tuple[str, int]:
        """The sha256 and size of an open file (not closed), read in bounded chunks, holes not read."""
        digest, size = hashlib.sha256(), 0
        os.lseek(fd, 0, os.SEEK_SET)
        for offset, data in fs.chunks(fd):
            digest.update(fs.ZEROS if data is None else data)
            size = offset + (fs.CHUNK if data is None else len(data))
        os.lseek(fd, 0, os.SEEK_SET)
        return digest.hexdigest(), size

    def read_bytes(self, sha: str) -> bytes:
        return self.path(sha).read_bytes()

    def manifest_save(self, manifest: Manifest) -> str:
        return self.put_bytes(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())

    def manifest_load(self, sha: str) -> Manifest:
        return json.loads(self.read_bytes(sha))


@dataclass
class Snapshotter:
    """Snapshots one workspace again and again. A stat key (inode, size, mtime) is no evidence of unchanged
    content where sandboxed code could have written: it can rewrite a file with the same size and put its mtime
    back. So every file is read and hashed at every snapshot (bounded chunks, holes not read), except the
    ``protected`` ones (the task's read-only files, which the sandbox cannot write) whose key has not changed;
    nothing is stored again unless its content changed."""

    workspace: Path
    store: BlobStore
    protected: frozenset[str] = frozenset()
    _known: dict[str, tuple[tuple[int, int, int], str]] = field(default_factory=dict)

    def remember(self, rel: str, sha: str) -> None:
        self._known[rel] = (fs.stat_key(os.stat(self.workspace / rel)), sha)

    def take(self, *, full: bool = True) -> tuple[str, Manifest]:
        """Regular files only (links, FIFOs and sockets are not part of a submission), read through
        descriptors that never follow a link, so a link swapped in meanwhile cannot pull in outside files.
        A workspace too deep or with too many files to walk raises fs.WalkLimitError (never a partial
        snapshot). ``full=False`` trusts every unchanged stat key: only for a snapshot after which no sandboxed
        code can have run since the last one (the environment says so: ``Environment.sandbox_may_have_written``)."""
        manifest: Manifest = {}
        for entry in fs.walk_files(self.workspace, skip_dirs=SKIP_DIRS):
            known = self._known.get(entry.rel)
            if known and known[0] == entry.key and (entry.rel in self.protected or not full):
                manifest[entry.rel] = [known[1], entry.size]
                continue
            try:
                fd = fs.open_entry(self.workspace, entry.rel)
            except (OSError, fs.UnsafePath):
                continue  # gone or replaced by a link since it was listed
            key = fs.stat_key(os.fstat(fd))
            if known:  # the content is probably stored already: hash it first, store it only if it changed
                try:
                    sha, size = self.store.hash_fd(fd)
                except BaseException:
                    os.close(fd)
                    raise
                if sha == known[1]:
                    os.close(fd)
                    self._known[entry.rel] = (key, sha)
                    manifest[entry.rel] = [sha, size]
                    continue
            sha, size = self.store.put_fd(fd)
            self._known[entry.rel] = (key, sha)
            manifest[entry.rel] = [sha, size]
        for rel in set(self._known) - set(manifest):
            del self._known[rel]
        return self.store.manifest_save(manifest), manifest


def manifest_restore(manifest: Manifest, dest: Path, store: BlobStore, *, link: set[str] | None = None) -> Snapshotter:
    """Lay out a manifest in an empty folder. Paths in ``link`` are hard-linked to their (read-only) blob.

    Returns a Snapshotter that already knows every restored file, so the next snapshot stores nothing and
    hashes only what is not in ``link`` (the read-only files, which the sandbox cannot write).
    """
    dest.mkdir(parents=True, exist_ok=True)
    link = link or set()
    snapshotter = Snapshotter(dest, store, protected=frozenset(link))
    for rel, (sha, _size) in sorted(manifest.items()):
        target = dest / rel
        if not target.resolve().is_relative_to(dest.resolve()):
            raise ValueError(f"manifest path {rel!r} leaves the workspace")
        target.parent.mkdir(parents=True, exist_ok=True)
        source = store.path(sha)
        if rel in link:
            try:
                os.link(source, target)
            except OSError:
                _copy_sparse(source, target)
                os.chmod(target, 0o444)
        else:
            _copy_sparse(source, target)
            os.chmod(target, 0o644)
        snapshotter.remember(rel, sha)
    return snapshotter


def _copy_sparse(source: Path, target: Path) -> None:
    """Copy a blob into a workspace in bounded chunks, a sparse blob staying sparse."""
    src = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            fs.copy_fd(src, dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def workspace_restore(manifest: Manifest, dest: Path, store: BlobStore, *, read_only: set[str], sandbox) -> Snapshotter:
    """Lay out a snapshot as a workspace for sandboxed code: the task's read-only files hard-linked to their
    blobs where the sandbox keeps them safe (copied otherwise), and every other file the sandbox user's."""
    snapshotter = manifest_restore(manifest, dest, store, link=read_only if sandbox.protects_links else set())
    writable_for_sandbox(dest, sandbox.ids, read_only=read_only)
    return snapshotter


def manifest_diff(before: Manifest, after: Manifest) -> dict[str, list[str]]:
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(p for p in set(before) & set(after) if before[p][0] != after[p][0])
    return {"added": added, "removed": removed, "changed": changed}


def remove_tree(path: Path) -> None:
    """Remove a folder whatever a sandboxed process left in it (links, deep nesting, odd permissions)."""
    from .workspaces import workspace_unmount  # a sized workspace: its mounts go first

    path = Path(path)
    workspace_unmount(path)
    if not path.exists() and not path.is_symlink():
        return
    try:
        shutil.rmtree(path)
    except (OSError, RecursionError):
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], check=False, timeout=600)
