"""Task packages as zip files: safe extraction (no path tricks, no links, no bombs) and export."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from .package import IGNORED_NAMES, TaskPackageError, iter_files

ZIP_EPOCH = (2020, 1, 1, 0, 0, 0)
MAX_NAME_BYTES = 255  # a file or folder name, as Linux file systems allow
MAX_PATH_BYTES = 1024  # a whole path inside the package
ENCRYPTED_FLAG = 0x1  # general purpose bit 0 of a zip member: its data is encrypted


@dataclass(frozen=True)
class PackageLimits:
    """How big a package may unpack to: bytes in all, bytes per file, files. A task package's come from the
    BENCH_TASK_MAX_* settings, an agent package's total from its own (``max_bytes_setting``, named in the message
    that refuses a package over it)."""

    max_bytes: int
    max_file_bytes: int
    max_files: int
    max_bytes_setting: str = "BENCH_TASK_MAX_BYTES"
    max_files_setting: str = "BENCH_TASK_MAX_FILES"

    def unpacked_at_most(self, zip_size: int) -> int:
        """What a zip of ``zip_size`` bytes may unpack to: its size times BENCH_UPLOAD_MAX_RATIO (a small zip at least
        BENCH_UPLOAD_RATIO_FLOOR_BYTES), never over ``max_bytes``: a 1 MB zip does not become a gigabyte of files."""
        by_ratio = max(zip_size * settings.BENCH_UPLOAD_MAX_RATIO, settings.BENCH_UPLOAD_RATIO_FLOOR_BYTES)
        return min(self.max_bytes, by_ratio)

    @classmethod
    def for_tasks(cls) -> PackageLimits:
        return cls(
            max_bytes=settings.BENCH_TASK_MAX_BYTES,
            max_file_bytes=settings.BENCH_TASK_MAX_FILE_BYTES,
            max_files=settings.BENCH_TASK_MAX_FILES,
        )

    @classmethod
    def for_logs(cls) -> PackageLimits:
        """A log's: a task package's sizes, and at most BENCH_TRACE_MAX_FILES files (each becomes a blob)."""
        return replace(
            cls.for_tasks(), max_files=settings.BENCH_TRACE_MAX_FILES, max_files_setting="BENCH_TRACE_MAX_FILES"
        )


def _check_member(info: zipfile.ZipInfo) -> PurePosixPath | None:
    name = info.filename.replace("\\", "/")
    path = PurePosixPath(name)
    if info.flag_bits & ENCRYPTED_FLAG:
        raise TaskPackageError(
            f"the zip holds an encrypted member ({info.filename[:80]!r}); zip the package without a password"
        )
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise TaskPackageError(f"the zip holds an absolute path ({info.filename!r}); paths must be relative")
    if ".." in path.parts:
        raise TaskPackageError(f"the zip holds a path with '..' ({info.filename!r}); it would leave the package")
    shown = info.filename[:80] + ("..." if len(info.filename) > 80 else "")
    if "\0" in name or len(name.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        raise TaskPackageError(
            f"the zip holds a path that is not a valid file name or is over {MAX_PATH_BYTES} bytes ({shown!r})"
        )
    long_part = next((p for p in path.parts if len(p.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES), None)
    if long_part is not None:
        raise TaskPackageError(
            f"the zip holds a name over {MAX_NAME_BYTES} bytes ({long_part[:80]!r}..., "
            f"{len(long_part.encode('utf-8', 'surrogateescape'))} bytes); shorten it"
        )
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise TaskPackageError(f"the zip holds a symbolic link ({info.filename!r}); packages hold regular files only")
    if info.is_dir() or any(part in IGNORED_NAMES for part in path.parts) or path.name.startswith("._"):
        return None
    if not path.parts:
        raise TaskPackageError(
            f"the zip holds a file named {info.filename!r}, which is no file name; every file needs a name of its own"
        )
    return path


def shown_path(path: PurePosixPath) -> str:
    text = str(path)
    return repr(text[:80] + ("..." if len(text) > 80 else ""))


TASK_EXPECTED = "a task folder with env/ and scripts/"


def archive_extract(
    zip_path: Path, dest: Path, *, expected: str = TASK_EXPECTED, limits: PackageLimits | None = None
) -> Path:
    """Extract a package zip into dest and return the package root (the zip's single top folder, if any).
    ``expected`` says what the zip should hold, for the message when it holds nothing; ``limits`` how big it may
    unpack to (default: a task package's, ``PackageLimits.for_tasks``).

    Sizes are checked against the headers first and against the bytes actually decompressed while writing,
    so a zip bomb stops at the limit. On any error nothing is left behind in dest.
    """
    limits = limits or PackageLimits.for_tasks()
    max_total, max_file, max_files = limits.max_bytes, limits.max_file_bytes, limits.max_files
    try:
        archive = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise TaskPackageError(f"not a zip file: {exc}") from exc
    try:
        with archive:
            members = [(info, path) for info in archive.infolist() if (path := _check_member(info)) is not None]
            if not members:
                raise TaskPackageError(f"the zip holds no files; expected {expected}")
            if len(members) > max_files:
                raise TaskPackageError(
                    f"the zip holds {len(members)} files; at most {max_files} are allowed ({limits.max_files_setting})"
                )
            declared = sum(info.file_size for info, _ in members)
            if declared > max_total:
                raise TaskPackageError(
                    f"the zip unpacks to {declared} bytes; at most {max_total} bytes are allowed "
                    f"({limits.max_bytes_setting})"
                )
            zip_size = zip_path.stat().st_size
            max_total = limits.unpacked_at_most(zip_size)
            if declared > max_total:
                raise TaskPackageError(
                    f"the zip unpacks to {declared} bytes from {zip_size}: at most {settings.BENCH_UPLOAD_MAX_RATIO} "
                    f"times its size is allowed (BENCH_UPLOAD_MAX_RATIO), {max_total} bytes"
                )
            written = 0
            for info, path in members:
                if info.file_size > max_file:
                    raise TaskPackageError(f"{path} is {info.file_size} bytes; a file may be at most {max_file} bytes")
                target = dest / Path(*path.parts)
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    out_file = open(target, "xb")  # noqa: SIM115 - closed by the with below
                except (FileExistsError, IsADirectoryError, NotADirectoryError):
                    raise TaskPackageError(
                        f"the zip holds {path} twice, or as both a file and a folder; every path must be unique"
                    ) from None
                except OSError as exc:  # a name this file system refuses: the package's fault, said plainly
                    raise TaskPackageError(
                        f"the zip holds a path that cannot be unpacked ({shown_path(path)}): {exc.strerror}"
                    ) from None
                size = 0
                with archive.open(info) as src, out_file as out:
                    while chunk := src.read(1 << 20):
                        size += len(chunk)
                        written += len(chunk)
                        if size > max_file or written > max_total:
                            raise TaskPackageError(
                                f"{path} unpacks to more than its header says (over the size limit): a zip bomb?"
                            )
                        out.write(chunk)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError) as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise TaskPackageError(f"the zip is damaged or uses an unsupported format: {exc}") from exc
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    entries = [p for p in dest.iterdir() if p.name not in IGNORED_NAMES] if dest.exists() else []
    if len(entries) == 1 and entries[0].is_dir() and not (dest / "scripts").exists():
        return entries[0]
    return dest


def folder_check_sizes(root: Path, limits: PackageLimits | None = None) -> None:
    """The same limits for a folder import: file count, file size, total size, no links."""
    limits = limits or PackageLimits.for_tasks()
    total, count = 0, 0
    for rel, path in iter_files(root):  # which refuses links, pipes and devices
        size = path.stat().st_size
        count += 1
        total += size
        if size > limits.max_file_bytes:
            raise TaskPackageError(f"{rel} is {size} bytes; a file may be at most {limits.max_file_bytes}")
    if count > limits.max_files:
        raise TaskPackageError(f"the package holds {count} files; at most {limits.max_files} are allowed")
    if total > limits.max_bytes:
        raise TaskPackageError(
            f"the package holds {total} bytes; at most {limits.max_bytes} are allowed ({limits.max_bytes_setting})"
        )


def archive_create(root: Path, out: Path, *, prefix: str) -> int:
    """Zip a package folder deterministically (sorted names, fixed timestamps); returns the file count."""
    count = 0
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for rel, path in iter_files(root):
            info = zipfile.ZipInfo(f"{prefix}/{rel}", date_time=ZIP_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(path, "rb") as src, archive.open(info, "w") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            count += 1
    return count


@contextmanager
def upload_saved(upload: UploadedFile, *, prefix: str, keep_name: bool = False) -> Iterator[Path]:
    """``with upload_saved(upload, prefix=...) as path:`` an uploaded file (the page's or the API's) written to a
    temporary file, streamed chunk by chunk, and removed afterwards whatever happens. ``keep_name``: the file has the
    upload's own name (in a folder of its own), so what is said of it names the file its uploader knows."""
    if keep_name:
        folder = Path(tempfile.mkdtemp(prefix=prefix))
        base = Path(upload.name or "").name  # a name the file system takes: a short one of printable characters
        fits = base not in ("", ".", "..") and len(base.encode()) <= 200 and base.isprintable()
        path = folder / (base if fits else "upload" + Path(base).suffix[:20])
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    else:
        fd, name = tempfile.mkstemp(prefix=prefix, suffix=Path(upload.name or "").suffix or ".zip")
        path = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
        yield path
    finally:
        path.unlink(missing_ok=True)
        if keep_name:
            path.parent.rmdir()


class extracted:  # noqa: N801 - used as a context manager, reads like a function
    """``with extracted(zip_or_folder) as root:`` a package root, cleaned up afterwards; a zip or a folder over
    ``limits`` (default: a task package's) is refused."""

    def __init__(
        self,
        source: Path,
        *,
        name: str | None = None,
        expected: str = TASK_EXPECTED,
        limits: PackageLimits | None = None,
    ) -> None:
        self.source = Path(source)
        self.expected = expected
        self.limits = limits
        self.tmp: Path | None = None
        #: The name a slug is made from: the folder's, the zip's single top folder's, or the zip file's stem.
        self.name = name or self.source.name

    def __enter__(self) -> Path:
        if self.source.is_dir():
            folder_check_sizes(self.source, self.limits)
            return self.source
        if not self.source.exists():
            raise TaskPackageError(f"{self.source} does not exist")
        self.tmp = Path(tempfile.mkdtemp(prefix="task-import-"))
        try:
            root = archive_extract(self.source, self.tmp / "package", expected=self.expected, limits=self.limits)
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)  # __exit__ does not run when __enter__ fails
            raise
        self.name = root.name if root.name != "package" else Path(self.name).stem
        return root

    def __exit__(self, *exc) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
