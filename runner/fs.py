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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_DEPTH = 64
MAX_PATH = 1024


class UnsafePath(Exception):
    """The path is not an ordinary file or folder inside the root; the message says why."""


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
    parts = split(rel)
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


def walk_files(root: Path, *, skip_dirs: frozenset[str] = frozenset(), max_files: int = 200_000) -> Iterator[Entry]:
    """Every regular file below root (iteratively, no links followed, at most MAX_DEPTH folders deep)."""
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
                        if entry.name in skip_dirs or depth + 1 >= MAX_DEPTH:
                            continue
                        try:
                            child = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
                        except OSError:
                            continue
                        stack.append((child, rel + "/", depth + 1))
                    elif stat.S_ISREG(st.st_mode):
                        count += 1
                        if count > max_files:
                            return
                        yield Entry(rel, st.st_size, stat_key(st))
            finally:
                os.close(fd)
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def open_entry(root: Path, rel: str) -> int:
    """Open a file found by walk_files for reading (refusing it if it became a link or special file)."""
    return open_file(root, rel, os.O_RDONLY)
