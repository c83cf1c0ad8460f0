"""File operations below a root folder that never follow a symbolic link and never leave the root.

Every path is walked one component at a time from a descriptor of the root, each opened with O_NOFOLLOW;
so a link planted in the workspace (even one swapped in while the operation runs) makes the operation
fail instead of reaching outside. Only regular files are read or written: FIFOs, sockets and devices are
refused, never opened for blocking I/O.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_DEPTH = 64
MAX_PATH = 1024


class UnsafePath(Exception):
    """The path is not an ordinary file or folder inside the root; the message says why."""


class WalkLimitError(Exception):
    """A workspace is deeper or holds more files than a walk may cover: an error, never a silent cut (what is
    not walked is neither counted against the disk limit nor snapshotted)."""


def shown(name: str) -> str:
    """A file name as text anyone can read: a name that is not UTF-8 (Python holds its bytes as surrogates)
    shows those bytes escaped, ``bad\\xffname.txt``; any other name is itself."""
    if name.isascii():
        return name
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return "".join(_shown_char(c) for c in name)


def _shown_char(c: str) -> str:
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as os.fsdecode holds it
        return f"\\x{code - 0xDC00:02x}"
    if 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}"
    return c


def split(rel: str) -> list[str]:
    """Path components of a relative path, or UnsafePath (absolute, '..', NUL, too long)."""
    if not isinstance(rel, str) or not rel.strip():
        raise UnsafePath("the path is empty")
    if "\0" in rel or len(rel) > MAX_PATH:
        raise UnsafePath("the path is not a valid file name")
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafePath("the path is not valid UTF-8") from None
    path = PurePosixPath(rel)
    if path.is_absolute() or rel.startswith("~"):
        raise UnsafePath("the path is absolute")
    parts = [p for p in path.parts if p not in ("", ".")]
    if ".." in parts:
        raise UnsafePath("the path goes up with '..'")
    return parts


@contextlib.contextmanager
def _fd(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def open_dir(root: Path, parts: list[str], *, create: bool = False, owner: tuple[int, int] | None = None) -> int:
    """A descriptor of the folder root/parts (created if asked), walked without following links."""
    fd = os.open(root, DIR_FLAGS)
    try:
        for part in parts:
            try:
                child = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, DIR_FLAGS, dir_fd=fd)
                if owner is not None:
                    os.fchown(child, *owner)
            except OSError:
                raise UnsafePath(f"'{part}' is not a folder (or is a link)") from None
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_file(
    root: Path,
    rel: str,
    flags: int,
    *,
    mode: int = 0o644,
    create_dirs: bool = False,
    owner: tuple[int, int] | None = None,
) -> int:
    """Open a regular file below root for reading or writing; links and special files are refused."""
    return _open_parts(root, split(rel), flags, mode=mode, create_dirs=create_dirs, owner=owner)


def _open_parts(
    root: Path,
    parts: list[str],
    flags: int,
    *,
    mode: int = 0o644,
    create_dirs: bool = False,
    owner: tuple[int, int] | None = None,
) -> int:
    if not parts:
        raise UnsafePath("the path names the workspace itself, not a file")
    with _fd(open_dir(root, parts[:-1], create=create_dirs, owner=owner)) as parent:
        try:
            fd = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO):  # a link; a FIFO without a reader
                raise UnsafePath(f"'{parts[-1]}' is a link or a special file") from None
            raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UnsafePath(f"'{parts[-1]}' is not a regular file")
    os.set_blocking(fd, True)
    return fd


def read_bytes(root: Path, rel: str, *, limit: int) -> bytes:
    with _fd(open_file(root, rel, os.O_RDONLY)) as fd:
        size = os.fstat(fd).st_size
        if size > limit:
            raise OverflowError(size)
        chunks, total = [], 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise OverflowError(total)
        return b"".join(chunks)


def write_bytes(
    root: Path, rel: str, data: bytes, *, append: bool = False, owner: tuple[int, int] | None = None
) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    with _fd(open_file(root, rel, flags, create_dirs=True, owner=owner)) as fd:
        if owner is not None:
            os.fchown(fd, *owner)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]


CHUNK = 1 << 20
ZEROS = bytes(CHUNK)


def data_extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of the parts of a file that hold data; the holes of a sparse file are left out (all of the
    file when the file system cannot say)."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole from pos to the end
                return
            yield pos, size  # SEEK_DATA not supported: all of it is data
            return
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        yield start, end
        pos = end


def chunks(fd: int, *, limit: int | None = None) -> Iterator[tuple[int, bytes | None]]:
    """The content of an open file in bounded chunks, (offset, data), with ``None`` for a chunk-sized run of a
    hole (zeros not read, not held). Memory stays at one chunk whatever the file's size; OverflowError past
    ``limit`` bytes."""
    size = os.fstat(fd).st_size
    if limit is not None and size > limit:
        raise OverflowError(size)
    pos = 0
    for start, end in data_extents(fd, size):
        while pos < start:
            step = min(CHUNK, start - pos)
            yield pos, None if step == CHUNK else bytes(step)
            pos += step
        os.lseek(fd, start, os.SEEK_SET)
        while pos < end:
            data = os.read(fd, min(CHUNK, end - pos))
            if not data:  # the file shrank while it was read
                return
            yield pos, data
            pos += len(data)
    while pos < size:
        step = min(CHUNK, size - pos)
        yield pos, None if step == CHUNK else bytes(step)
        pos += step


def copy_fd(src: int, dst: int, *, limit: int | None = None) -> int:
    """Copy an open file into an open, empty file in bounded chunks, keeping holes holes (a sparse source makes
    a sparse copy); the bytes copied (the source's apparent size)."""
    size = 0
    for offset, data in chunks(src, limit=limit):
        if data is None or data == ZEROS[: len(data)]:
            size = offset + (CHUNK if data is None else len(data))
            continue
        os.lseek(dst, offset, os.SEEK_SET)
        view = memoryview(data)
        while view:
            view = view[os.write(dst, view) :]
        size = offset + len(data)
    os.ftruncate(dst, size)
    return size


def copy_file(root: Path, src: str, dst: str, *, limit: int | None = None, owner: tuple[int, int] | None = None) -> int:
    """Copy a regular file below root to another path below root, streamed and hole-preserving."""
    with _fd(open_file(root, src, os.O_RDONLY)) as source:
        if limit is not None and os.fstat(source).st_size > limit:
            raise OverflowError(os.fstat(source).st_size)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        with _fd(open_file(root, dst, flags, create_dirs=True, owner=owner)) as target:
            if owner is not None:
                os.fchown(target, *owner)
            return copy_fd(source, target, limit=limit)


def kind(root: Path, rel: str) -> str:
    """'file', 'dir', 'missing' or 'other' (a link or special file), without following links."""
    parts = split(rel) if rel not in ("", ".") else []
    if not parts:
        return "dir"
    try:
        with _fd(open_dir(root, parts[:-1])) as parent:
            st = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return "missing"
    except (UnsafePath, NotADirectoryError):
        return "other"
    if stat.S_ISREG(st.st_mode):
        return "file"
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    return "other"


def list_dir(root: Path, rel: str) -> list[tuple[str, bool]]:
    """(name, is_folder) of the entries of a folder below root."""
    parts = split(rel) if rel not in ("", ".") else []
    with _fd(open_dir(root, parts)) as fd, os.scandir(fd) as entries:
        return sorted((e.name, e.is_dir(follow_symlinks=False)) for e in entries)


def unlink(root: Path, rel: str) -> None:
    parts = split(rel)
    with _fd(open_dir(root, parts[:-1])) as parent:
        os.unlink(parts[-1], dir_fd=parent)


def stat_key(st: os.stat_result) -> tuple[int, int, int]:
    """(inode, size, mtime_ns): a file whose key is unchanged is taken to have unchanged content."""
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass
class Entry:
    rel: str
    size: int
    key: tuple[int, int, int]  # stat_key
    allocated: int = 0  # bytes the file system gave it (a sparse file: fewer than its size)


MAX_FILES = 200_000


def walk_files(
    root: Path, *, skip_dirs: frozenset[str] = frozenset(), max_files: int | None = None, max_depth: int | None = None
) -> Iterator[Entry]:
    """Every regular file below root (iteratively, no links followed). A folder deeper than ``max_depth`` or a
    file past ``max_files`` raises WalkLimitError: a walk never silently leaves files out."""
    max_files = MAX_FILES if max_files is None else max_files
    max_depth = MAX_DEPTH if max_depth is None else max_depth
    stack: list[tuple[int, str, int]] = [(os.open(root, DIR_FLAGS), "", 0)]
    count = 0
    try:
        while stack:
            fd, prefix, depth = stack.pop()
            try:
                with os.scandir(fd) as entries:
                    items = sorted(entries, key=lambda e: e.name)
                for entry in items:
                    rel = f"{prefix}{entry.name}"
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        if entry.name in skip_dirs:
                            continue
                        if depth + 1 >= max_depth:
                            raise WalkLimitError(
                                f"holds folders nested more than {max_depth} deep ({shown(rel)[:200]}/...)"
                            )
                        try:
                            child = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
                        except OSError:
                            continue
                        stack.append((child, rel + "/", depth + 1))
                    elif stat.S_ISREG(st.st_mode):
                        count += 1
                        if count > max_files:
                            raise WalkLimitError(f"holds more than {max_files} files")
                        yield Entry(rel, st.st_size, stat_key(st), st.st_blocks * 512)
            finally:
                os.close(fd)
    finally:
        for fd, _, _ in stack:
            os.close(fd)


RACY_NS = 100_000_000  # a folder changed this close to its listing is listed again (timestamps lag a clock tick)


@dataclass
class Listing:
    """A folder's entries as read once, and the folder's stat key then: while the key is the same, so are
    the entries (creating, removing or renaming an entry sets the folder's ctime, which no process can put
    back), provided the folder's ctime was already older than the listing by more than a clock tick (a change
    later in the same tick could leave it as it was)."""

    key: tuple[int, int, int, int]  # device, inode, mtime_ns, ctime_ns
    listed_at: int  # time.time_ns() before the folder was read
    folders: list[str]
    files: list[str]  # regular files
    derived: dict = field(default_factory=dict)  # what a walk's user worked out from these entries, kept with them

    def still_true(self, key: tuple[int, int, int, int]) -> bool:
        return key == self.key and key[3] < self.listed_at - RACY_NS


@dataclass
class Folder:
    fd: int  # open while the walk is at this folder
    prefix: str  # its path below the root with a trailing slash ("" for the root)
    listing: Listing
    trusted: bool  # the listing is the one of the walk before: the folder's entries have not changed since


class FolderWalk:
    """Walks one folder tree again and again, as ``walk_files`` walks (no link followed, the same limits),
    keeping each folder's ``Listing``: a folder whose entries have not changed since the last walk is not read
    again, and its files need not be looked at by a user that knows they cannot change (the task's read-only
    files). A walk that raises keeps the listings of the walk before."""

    def __init__(self, root: Path, *, skip_dirs: frozenset[str] | set[str] = frozenset()) -> None:
        self.root, self.skip_dirs = Path(root), frozenset(skip_dirs)
        self._listings: dict[str, Listing] = {}

    def folders(self) -> Iterator[Folder]:
        listings: dict[str, Listing] = {}
        stack: list[tuple[int, str, int]] = [(os.open(self.root, DIR_FLAGS), "", 0)]
        count = 0
        try:
            while stack:
                fd, prefix, depth = stack.pop()
                try:
                    now = time.time_ns()
                    st = os.fstat(fd)
                    key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
                    listing = self._listings.get(prefix)
                    trusted = listing is not None and listing.still_true(key)
                    if not trusted:
                        listing = self._list(fd, key, now)
                    listings[prefix] = listing
                    for name in listing.folders:
                        if depth + 1 >= MAX_DEPTH:
                            deep = shown(prefix + name)[:200]
                            raise WalkLimitError(f"holds folders nested more than {MAX_DEPTH} deep ({deep}/...)")
                        try:
                            child = os.open(name, DIR_FLAGS, dir_fd=fd)
                        except OSError:
                            continue
                        stack.append((child, f"{prefix}{name}/", depth + 1))
                    count += len(listing.files)
                    if count > MAX_FILES:
                        raise WalkLimitError(f"holds more than {MAX_FILES} files")
                    yield Folder(fd, prefix, listing, trusted)
                finally:
                    os.close(fd)
        finally:
            for fd, _, _ in stack:
                os.close(fd)
        self._listings = listings

    def _list(self, fd: int, key: tuple[int, int, int, int], now: int) -> Listing:
        folders, files = [], []
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in self.skip_dirs:
                            folders.append(entry.name)
                    elif entry.is_file(follow_symlinks=False):
                        files.append(entry.name)
                except OSError:
                    continue
        return Listing(key, now, sorted(folders), sorted(files))


def open_entry(root: Path, rel: str) -> int:
    """Open a file found by walk_files for reading (refusing it if it became a link or special file). Its name
    may be any bytes (held as surrogates): a file the sandbox named so is still part of the workspace."""
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise UnsafePath("the path is not a file found below the root")
    return _open_parts(root, parts, os.O_RDONLY)
