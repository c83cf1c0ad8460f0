"""Small blobs packed together, so that a blob of a few hundred bytes does not take a 4 kB block (and a shard folder)
of its own: a step's manifest and the script it edited cost a record each in a pack, not two files.

A pack (``<blobs>/packs/<n>.pack``) is a sequence of records, each a header (``HEADER``: a magic word, the
sha256, whether the content is zlib-packed, its length, when it was stored) and the content as stored. Writers
append whole records under an exclusive ``flock`` of the pack, the only thing that writes a pack besides the
collector's compaction (``compact``), which takes the same lock and replaces the pack by one of the records it
keeps. A process keeps an index of the records it has read (``_Index``), read forward from where it stopped when a
blob is missing from it; a pack replaced since (its inode changed) is read again from the start. Content read is
checked against its sha256, so a damaged record is never given out as the blob.

A blob stored again finds its record; one stored longer ago than half the collector's grace period is written
again (a newer record), which is what setting a blob file's time to now is for a file: the collector removes only
records nothing names that are older than its grace period, and keeps the newest record of each blob it keeps.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

MAGIC = b"MBP1"
HEADER = struct.Struct(">4s32sBIQ")  # magic, sha256, flags, length, stored at (unix seconds)
ZLIB = 1
#: Content stored (after packing) in at most this many bytes goes into a pack: anything smaller than a 4 kB block.
SMALL = 3584
#: A pack is appended to until it holds this many bytes; then the next one is started.
ROLL = 64 << 20
READ_CHUNK = 4 << 20


@dataclass(frozen=True)
class Record:
    pack: str
    inode: int
    offset: int  # of the content, after the header
    length: int
    flags: int
    stored_at: int


class _Index:
    """The records of one packs folder that this process has read, newest per blob."""

    def __init__(self) -> None:
        self.records: dict[bytes, Record] = {}
        self.read_to: dict[str, tuple[int, int]] = {}  # pack -> (inode, offset read up to)
        self.lock = threading.Lock()

    def add(self, raw: bytes, record: Record) -> None:
        known = self.records.get(raw)
        if known is None or record.stored_at >= known.stored_at:
            self.records[raw] = record

    def forget(self, pack: str) -> None:
        self.records = {raw: r for raw, r in self.records.items() if r.pack != pack}
        self.read_to.pop(pack, None)


_indexes: dict[tuple[int, str], _Index] = {}
_indexes_lock = threading.Lock()


def _index_for(folder: Path) -> _Index:
    key = (os.getpid(), str(folder))  # a forked process reads for itself
    with _indexes_lock:
        index = _indexes.get(key)
        if index is None:
            index = _indexes[key] = _Index()
    return index


def _records(data: bytes, start: int) -> tuple[list[tuple[bytes, int, int, int, int]], int]:
    """The whole records in ``data`` (which begins at file offset ``start``): (sha, content offset, length, flags,
    stored at) each, and the offset after the last whole one."""
    found, at = [], 0
    while at + HEADER.size <= len(data):
        magic, raw, flags, length, stored_at = HEADER.unpack_from(data, at)
        if magic != MAGIC or at + HEADER.size + length > len(data):
            break
        found.append((raw, start + at + HEADER.size, length, flags, stored_at))
        at += HEADER.size + length
    return found, start + at


class Packs:
    """The packs of a blob store (``runner.workspace.snapshots.BlobStore``), in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.index = _index_for(folder)

    # -- reading ------------------------------------------------------------------------------------------------
    def names(self) -> list[str]:
        try:
            return sorted((n for n in os.listdir(self.folder) if n.endswith(".pack")), key=lambda n: int(n[:-5]))
        except FileNotFoundError:
            return []

    def refresh(self) -> None:
        """Read the records appended since this process last looked, and packs replaced since, again."""
        with self.index.lock:
            names = self.names()
            for gone in set(self.index.read_to) - set(names):
                self.index.forget(gone)
            for name in names:
                self._read_pack(name)

    def _read_pack(self, name: str) -> int:
        """Read a pack's new records into the index (the index's lock held); the offset read up to."""
        try:
            fd = os.open(self.folder / name, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self.index.forget(name)
            return 0
        try:
            st = os.fstat(fd)
            inode, done = self.index.read_to.get(name, (st.st_ino, 0))
            if inode != st.st_ino:
                self.index.forget(name)
                inode, done = st.st_ino, 0
            while done < st.st_size:
                data = os.pread(fd, max(READ_CHUNK, HEADER.size + SMALL), done)
                found, after = _records(data, done)
                for raw, offset, length, flags, stored_at in found:
                    self.index.add(raw, Record(name, inode, offset, length, flags, stored_at))
                if after == done:
                    break  # a record being written, or a torn one (the next writer cuts it off)
                done = after
            self.index.read_to[name] = (inode, done)
            return done
        finally:
            os.close(fd)

    def record(self, sha: str, *, refresh: bool = True) -> Record | None:
        try:
            raw = bytes.fromhex(sha)
        except ValueError:
            return None  # not a sha256: no blob (as no file is named so)
        record = self.index.records.get(raw)
        if record is None and refresh:
            self.refresh()
            record = self.index.records.get(raw)
        return record

    def get(self, sha: str) -> bytes | None:
        """The blob's content, or None if no pack holds it."""
        for attempt in range(2):
            record = self.record(sha)
            if record is None:
                return None
            content = self._content(sha, record)
            if content is not None:
                return content
            if attempt == 0:  # the pack was replaced (compacted) since it was read: read it again
                with self.index.lock:
                    self.index.forget(record.pack)
        return None

    def _content(self, sha: str, record: Record) -> bytes | None:
        try:
            fd = os.open(self.folder / record.pack, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            if os.fstat(fd).st_ino != record.inode:
                return None
            stored = os.pread(fd, record.length, record.offset)
        finally:
            os.close(fd)
        try:
            content = zlib.decompress(stored) if record.flags & ZLIB else stored
        except zlib.error:
            return None
        return content if hashlib.sha256(content).hexdigest() == sha else None

    def fresh(self, sha: str) -> bool:
        """Whether a pack holds the blob stored recently enough that the collector keeps it (half its grace
        period): else it is to be stored again. The pack is looked at (a stat): one another process compacted or
        removed since it was read is read again first."""
        record = self.record(sha, refresh=False)
        if record is None:
            return False
        try:
            current = os.stat(self.folder / record.pack).st_ino == record.inode
        except FileNotFoundError:
            current = False
        if not current:
            with self.index.lock:
                self.index.forget(record.pack)
                self._read_pack(record.pack)
            record = self.record(sha, refresh=False)
        return record is not None and record.stored_at >= time.time() - settings.BENCH_BLOB_COLLECT_GRACE_S / 2

    # -- writing ------------------------------------------------------------------------------------------------
    def put(self, sha: str, stored: bytes, *, zlib_packed: bool) -> int:
        """Append the blob's record to the newest pack; the bytes it added."""
        self.folder.mkdir(exist_ok=True)
        flags = ZLIB if zlib_packed else 0
        stored_at = int(time.time())
        record = HEADER.pack(MAGIC, bytes.fromhex(sha), flags, len(stored), stored_at) + stored
        while True:
            names = self.names()
            name = names[-1] if names else "0.pack"
            path = self.folder / name
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                st = os.fstat(fd)
                try:
                    current = os.stat(path).st_ino == st.st_ino
                except FileNotFoundError:
                    current = False
                if not current:  # compacted or removed while this waited for the lock
                    continue
                if st.st_size >= ROLL:
                    next_name = f"{int(name[:-5]) + 1}.pack"
                    os.close(os.open(self.folder / next_name, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
                    continue
                with self.index.lock:
                    end = self._read_pack(name)
                if end < st.st_size:  # a writer died in the middle of a record: cut it off
                    os.ftruncate(fd, end)
                os.lseek(fd, end, os.SEEK_SET)
                view = memoryview(record)
                while view:
                    view = view[os.write(fd, view) :]
                with self.index.lock:
                    self.index.add(
                        bytes.fromhex(sha), Record(name, st.st_ino, end + HEADER.size, len(stored), flags, stored_at)
                    )
                    self.index.read_to[name] = (st.st_ino, end + len(record))
                return len(record)
            finally:
                os.close(fd)

    # -- collecting ---------------------------------------------------------------------------------------------
    def compact(self, named: set[str], cutoff: float, *, dry_run: bool = False) -> tuple[int, int, int]:
        """Drop the records nothing names that are older than ``cutoff``, and every record but the newest of a
        blob: each pack with any to drop is written again without them (an empty one is removed). (records kept,
        records dropped, bytes on disk freed)."""
        kept = dropped = freed = 0
        newest: dict[bytes, tuple[str, int]] = {}
        inodes: dict[str, int] = {}  # each pack as it was read here
        for name in self.names():
            try:
                with open(self.folder / name, "rb") as fh:
                    inodes[name], data = os.fstat(fh.fileno()).st_ino, fh.read()
            except FileNotFoundError:
                continue
            for raw, offset, _length, _flags, stored_at in _records(data, 0)[0]:
                if raw not in newest or stored_at >= newest[raw][1]:
                    newest[raw] = (f"{name}:{offset}", stored_at)
        for name, inode in inodes.items():
            k, d, f = self._compact_pack(name, inode, named, cutoff, newest, dry_run=dry_run)
            kept, dropped, freed = kept + k, dropped + d, freed + f
        for leftover in self.folder.glob(".tmp-*") if not dry_run else []:  # of a compaction that died
            if leftover.stat().st_mtime < cutoff:
                leftover.unlink(missing_ok=True)
        return kept, dropped, freed

    def _compact_pack(
        self, name: str, inode: int, named: set[str], cutoff: float, newest: dict, *, dry_run: bool
    ) -> tuple[int, int, int]:
        path = self.folder / name
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return 0, 0, 0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            st = os.fstat(fd)
            if st.st_ino != inode:  # replaced since it was read (another pass): its records' places moved
                return 0, 0, 0
            data = os.pread(fd, st.st_size, 0)
            keep = bytearray()
            kept = dropped = 0
            for raw, offset, length, _flags, stored_at in _records(data, 0)[0]:
                copy, newest_at = newest.get(raw, (f"{name}:{offset}", stored_at))
                is_newest = copy == f"{name}:{offset}" or stored_at > newest_at
                if is_newest and (raw.hex() in named or stored_at >= cutoff):
                    keep += data[offset - HEADER.size : offset + length]
                    kept += 1
                else:
                    dropped += 1
            if not dropped or dry_run:
                return kept, dropped, st.st_blocks * 512 - _blocks(len(keep)) if dropped else 0
            if keep:
                tmp = self.folder / f".tmp-{name}-{os.getpid()}"
                tmp.write_bytes(keep)
                os.chmod(tmp, 0o644)
                os.replace(tmp, path)
            else:
                path.unlink()
            return kept, dropped, max(st.st_blocks * 512 - _blocks(len(keep)), 0)
        finally:
            os.close(fd)


def _blocks(size: int) -> int:
    return -(-size // 4096) * 4096
