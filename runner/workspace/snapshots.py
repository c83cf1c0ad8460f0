"""Content-addressed workspace snapshots.

A blob is a file stored once under its sha256. A snapshot is a manifest ``{path: [sha256, size]}``, itself
stored as a blob, so a step that changed nothing points at the same manifest as the step before it and a
file that did not change costs nothing. Blobs are read-only; workspaces may hard-link read-only files to
them, so large task data is referenced, never copied per run.

A run's step snapshots are stored as deltas against a base, the task version's full manifest (the run's
initial snapshot): ``{"": {"base": sha, "removed": [path, ...]}, path: [sha256, size], ...}``, the entries
that differ from the base and the base's paths that are gone. The empty key cannot be a file's path, so a
full manifest (every snapshot stored before deltas) is told apart and loads as it is. ``manifest_load``
gives the full effective manifest of either; nothing else reads the stored form.

Content up to ``PACK_MAX`` bytes that zlib shrinks by a quarter or more (scripts, logs, manifests) is stored
packed, ``<sha>.z``; everything else, and every blob a workspace hard-links (the task's read-only files), is
stored as it is. Every blob is a file: the store keeps nothing in memory, however many blobs it holds. ``read_bytes``,
``open`` and ``copy_to`` read either form; ``linkable`` gives a blob as a file as it is, writing it out first if it
was stored packed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import stat
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from ..sandbox.identity import writable_for_sandbox
from . import fs

Manifest = dict[str, list]  # path -> [sha256, size]
SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints"}


BLOB_NAME = re.compile(r"[0-9a-f]{64}")


def blob_name(sha: str) -> str:
    """``sha`` if it can name a blob (a sha256 in hex), else FileNotFoundError: a name from a manifest or a row
    never leads to a path outside the store (``../../etc/passwd``)."""
    if not BLOB_NAME.fullmatch(sha):
        raise FileNotFoundError(f"no blob is named {sha[:80]!r}: a blob's name is its sha256, 64 hex digits")
    return sha


class BlobStore:
    """The blobs under ``root``. ``added_bytes`` counts what this instance added on disk (blocks of the files it
    stored that were not stored yet: deduplicated content and hard links cost nothing), for the storage limits of
    whoever stores through it (``runner.selectors.storage_refusal``).

    A blob already stored has its time set to now each time it is stored again (``_fresh``): the collector
    (``runner.execution.collector``) removes only blobs nothing names that are older than its grace period, so a
    blob a snapshot is about to name again is never removed in between."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root or settings.BENCH_BLOB_DIR)
        self.root.mkdir(parents=True, exist_ok=True)
        self.added_bytes = 0

    def path(self, sha: str) -> Path:
        """Where the blob is stored as it is (it may be stored packed instead: ``has``, ``linkable``)."""
        return self.root / blob_name(sha)[:2] / sha[2:]

    def packed_path(self, sha: str) -> Path:
        return self.root / blob_name(sha)[:2] / f"{sha[2:]}.z"

    def has(self, sha: str) -> bool:
        if not BLOB_NAME.fullmatch(sha):
            return False
        return self.path(sha).exists() or self.packed_path(sha).exists()

    def fresh(self, sha: str) -> bool:
        """Whether the blob is stored, its time set to now if so (the collector keeps it a grace period longer)."""
        return self._fresh(self.path(sha)) or self._fresh(self.packed_path(sha))

    @staticmethod
    def _fresh(path: Path) -> bool:
        """Whether the blob at ``path`` is stored, its time set to now if so (the collector keeps it)."""
        try:
            os.utime(path)
        except FileNotFoundError:
            return False
        except OSError:  # a hard link the worker does not own (root-owned task data): stored all the same
            return path.exists()
        return True

    def _commit(self, tmp: Path, sha: str, *, packed: bool = False) -> None:
        dest = self.packed_path(sha) if packed else self.path(sha)
        dest.parent.mkdir(exist_ok=True)
        os.chmod(tmp, 0o444)
        st = os.stat(tmp)
        os.replace(tmp, dest)
        if st.st_nlink == 1:  # a hard link to task data costs no disk
            self.added_bytes += st.st_blocks * 512

    def _write(self, sha: str, data: bytes, *, packed: bool) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            self._commit(Path(tmp), sha, packed=packed)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def put_bytes(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        if not self.fresh(sha):
            self._store(sha, data, _packed(data))
        return sha

    def _store(self, sha: str, data: bytes, packed: bytes | None) -> None:
        """Store content that is not stored yet (``packed``: its zlib form, if it is to be kept so)."""
        self._write(sha, data if packed is None else packed, packed=packed is not None)

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
            if self._fresh(self.path(sha)) if link else self.fresh(sha):
                os.unlink(tmp)
            elif link:
                os.unlink(tmp)
                try:
                    os.link(link_from, tmp)
                except OSError:
                    shutil.copyfile(link_from, tmp)
                self._commit(Path(tmp), sha)
            elif size <= PACK_MAX and (packed := _packed(data := Path(tmp).read_bytes())) is not None:
                os.unlink(tmp)
                self._store(sha, data, packed)
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
        try:
            return self.path(sha).read_bytes()
        except FileNotFoundError:
            pass
        return zlib.decompress(self.packed_path(sha).read_bytes())

    def open(self, sha: str) -> BinaryIO:
        """The blob's content as a binary file to read (a packed one, at most ``PACK_MAX`` bytes, unpacked in
        memory)."""
        try:
            return open(self.path(sha), "rb")  # noqa: SIM115 - the caller closes it
        except FileNotFoundError:
            return io.BytesIO(self.read_bytes(sha))

    def linkable(self, sha: str) -> Path:
        """The blob as it is, to hard-link: written out as a file first if it was stored packed."""
        path = self.path(sha)
        if not path.exists():
            self._write(sha, self.read_bytes(sha), packed=False)
        return path

    def copy_to(self, sha: str, target: Path) -> None:
        """Write the blob's content to a new file (not following a link there), a sparse blob staying sparse."""
        if not self.path(sha).exists():
            data = self.read_bytes(sha)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            return
        _copy_sparse(self.path(sha), target)

    def manifest_save(self, manifest: Manifest, *, base_sha: str = "", base: Manifest | None = None) -> str:
        """Store a manifest; with a base (a full manifest and its sha), only what differs from it. A manifest
        equal to its base is the base's sha."""
        if not base_sha:
            return self.put_bytes(_manifest_json(manifest))
        if base is None:
            base = self.manifest_load(base_sha)
        delta: dict = {path: entry for path, entry in manifest.items() if base.get(path) != entry}
        removed = sorted(path for path in base if path not in manifest)
        if not delta and not removed:
            return base_sha
        delta[DELTA_KEY] = {"base": base_sha, "removed": removed}
        return self.put_bytes(_manifest_json(delta))

    def manifest_load(self, sha: str) -> Manifest:
        """The full effective manifest of a snapshot, stored whole or as a delta against its base."""
        manifest = json.loads(self.read_bytes(sha))
        header = manifest.pop(DELTA_KEY, None)
        if header is None:
            return manifest
        full = self.manifest_load(header["base"])
        for path in header["removed"]:
            full.pop(path, None)
        full.update(manifest)
        return full


DELTA_KEY = ""  # no file's path: the header of a manifest stored as a delta
PACK_MAX = 1 << 20  # content this small is stored packed when zlib saves a quarter of it or more


def _packed(data: bytes) -> bytes | None:
    if len(data) > PACK_MAX or len(data) < 64:
        return None
    packed = zlib.compress(data, 6)
    return packed if len(packed) <= len(data) * 3 // 4 else None


def _manifest_json(manifest: dict) -> bytes:
    return json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()


@dataclass
class Snapshotter:
    """Snapshots one workspace again and again. A stat key (inode, size, mtime) is no evidence of unchanged
    content where sandboxed code could have written: it can rewrite a file with the same size and put its mtime
    back. So every file is read and hashed at every snapshot (bounded chunks, holes not read), except the
    ``protected`` ones (the task's read-only files, which the sandbox cannot write) whose key has not changed;
    nothing is stored again unless its content changed. A protected file in a folder whose entries have not
    changed since the last snapshot (``fs.Listing``) is not even looked at: a workspace of many read-only files
    costs a stat of each folder, not of each file.

    With a base (``deltas_from``), each snapshot is stored as what differs from it."""

    workspace: Path
    store: BlobStore
    protected: frozenset[str] = frozenset()
    base_sha: str = ""
    base: Manifest | None = None
    _known: dict[str, tuple[tuple[int, int, int], str]] = field(default_factory=dict)
    _walk: fs.FolderWalk | None = None

    def remember(self, rel: str, sha: str) -> None:
        self._known[rel] = (fs.stat_key(os.stat(self.workspace / rel)), sha)

    def deltas_from(self, sha: str, manifest: Manifest) -> None:
        """Store every snapshot as a delta against this full manifest (the task version's, the run's initial
        snapshot), so a step costs what it changed, not what the workspace holds."""
        self.base_sha, self.base = sha, manifest

    def take(self, *, full: bool = True) -> tuple[str, Manifest]:
        """Regular files only (links, FIFOs and sockets are not part of a submission), read through
        descriptors that never follow a link, so a link swapped in meanwhile cannot pull in outside files.
        A workspace too deep or with too many files to walk raises fs.WalkLimitError (never a partial
        snapshot). ``full=False`` trusts every unchanged stat key: only for a snapshot after which no sandboxed
        code can have run since the last one (the environment says so: ``Environment.sandbox_may_have_written``)."""
        manifest: Manifest = {}
        for item in self._files():
            if isinstance(item, dict):  # protected files in a folder unchanged since it was listed: the same files
                manifest.update(item)
                continue
            rel, size, key = item
            known = self._known.get(rel)
            if known and known[0] == key and (rel in self.protected or not full):
                manifest[rel] = [known[1], size]
                continue
            try:
                fd = fs.open_entry(self.workspace, rel)
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
                    self._known[rel] = (key, sha)
                    manifest[rel] = [sha, size]
                    continue
            sha, size = self.store.put_fd(fd)
            self._known[rel] = (key, sha)
            manifest[rel] = [sha, size]
        if len(self._known) != len(manifest):
            for rel in set(self._known) - set(manifest):
                del self._known[rel]
        return self.store.manifest_save(manifest, base_sha=self.base_sha, base=self.base), manifest

    def _files(self) -> Iterator[tuple[str, int, tuple[int, int, int]] | Manifest]:
        """(path, size, stat key) of every regular file below the workspace (``fs.FolderWalk``: no link followed,
        the limits of ``fs.walk_files``); the protected files already known in a folder whose listing still holds
        come as one manifest of them, neither listed nor looked at again."""
        if self._walk is None:
            self._walk = fs.FolderWalk(self.workspace, skip_dirs=SKIP_DIRS)
        for folder in self._walk.folders():
            names = folder.listing.files
            if folder.trusted:
                known, names = folder.listing.derived.get("snapshot") or self._known_split(folder)
                yield known
            for name in names:
                try:
                    st = os.stat(name, dir_fd=folder.fd, follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    yield folder.prefix + name, st.st_size, fs.stat_key(st)

    def _known_split(self, folder: fs.Folder) -> tuple[Manifest, list[str]]:
        """A trusted folder's protected files already known (as manifest entries), and the names of the others."""
        known_entries: Manifest = {}
        others: list[str] = []
        for name in folder.listing.files:
            rel = folder.prefix + name
            known = self._known.get(rel) if rel in self.protected else None
            if known is None:
                others.append(name)
            else:
                known_entries[rel] = [known[1], known[0][1]]
        folder.listing.derived["snapshot"] = (known_entries, others)
        return known_entries, others


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
        if rel in link:
            try:
                os.link(store.linkable(sha), target)
            except OSError:
                store.copy_to(sha, target)
                os.chmod(target, 0o444)
        else:
            store.copy_to(sha, target)
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
