"""Answers an agent brings: an uploaded package that carries the rows a ready task is scored on (its hidden
answers, or its test inputs, from which a copy of the public data set gives the answers by lookup) is refused by its
smoke test, naming the task. An agent must learn a task's answers in its runs, not bring them.

A task's rows are the distinctive ones (``MIN_WIDTH`` values or more, identifier columns left out) of its hidden
files (``scripts/`` but its code and texts) and of its env files named like ``test``, read from its prepared folder.
A package's files are read as streams of values in the encodings a package can carry: CSV, TSV and other delimited
text, JSON, NumPy's ``.npy`` and ``.npz``, each plain or compressed (gzip, bzip2, xz, zip members). A task row found
as consecutive values of a stream counts, wherever the stream holds it (a row with a label before or after it, a
whole table flattened), and so does a table row holding its values in another order with up to ``EXTRA`` more. Any
other file (a pickle, a tensor, a binary blob) is searched for the task's numeric rows as the raw bytes of a
float64, float32, int64 or int32 array. A package that holds ``SHARE`` of a task's rows (and at least ``MIN_ROWS``)
carries it. Nothing in a package is unpickled or run.

The other layers: a deployment's secret seed for generated data (``BENCH_TASK_SEED``), masked package data
(``[sandbox] hide``).
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import itertools
import json
import lzma
import re
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MIN_WIDTH = 4  # a row of fewer values (an id and a label) is not distinctive
MIN_ROWS = 10
SHARE = 0.5
MAX_TASK_ROWS = 2000  # the first rows of each file, enough to decide
EXTRA = 2  # values a package's row may hold beside a task row's, in any order
MAX_BYTES_SEARCHED = 200  # rows per task searched for as raw bytes in a binary file
# What one file may make the worker hold: its first 32 MB, decompressed, and at most 2,000,000 of its values (short
# strings; a few hundred MB at most) or table rows. A copy of a task's data set is found in its first part.
MAX_READ = 32 * 1024 * 1024
MAX_VALUES = 2_000_000
MAX_TABLE_ROWS = 200_000
ID_COLUMN = re.compile(r"^(id|index|.*_id|.*id|unnamed: 0)$", re.IGNORECASE)
SKIPPED = {"research_problem.txt", "read_only_files.txt", "source_code.txt"}
TEXT_SUFFIXES = {".csv", ".tsv", ".txt", ".json", ".jsonl", ".dat", ".data", ".tab", ".psv", ""}
BYTE_TYPES = ("<f8", "<f4", "<i8", "<i4")

Row = tuple[str, ...]


@dataclass
class Carried:
    """A task whose rows a package carries: how many of its rows (or of a sample searched as raw bytes) were found."""

    slug: str
    found: int
    rows: int

    def __str__(self) -> str:
        return f"{self.slug} ({self.found} of {self.rows} of its scored rows)"


def value(cell: object) -> str:
    """A value as both a task's file and a package's copy would give it: numbers by their value to 6 significant
    digits (16, "16" and 16.0 are one), text stripped and lower-cased."""
    if isinstance(cell, bool):
        return str(int(cell))
    if isinstance(cell, int | float | np.integer | np.floating):
        return f"{float(cell):.6g}"
    text = str(cell).strip()
    try:
        return f"{float(text):.6g}"
    except ValueError:
        return text.lower()


# -- a task's rows ----------------------------------------------------------------------------------------------


def task_rows(root: Path) -> set[Row]:
    """The distinctive rows of a prepared task folder (``PreparedTask.root``): its hidden files and test inputs."""
    files = [p for p in (root / "scripts").rglob("*") if p.is_file() and _hidden_data(p)]
    files += [p for p in (root / "env").rglob("*") if p.is_file() and "test" in p.name.lower()]
    rows: set[Row] = set()
    for path in files:
        try:
            table = _table_rows(path.name, _read(path.open("rb"), path.name))
            rows.update(row for row in table if len(row) >= MIN_WIDTH)
        except (csv.Error, ValueError, RecursionError, OSError, EOFError, lzma.LZMAError):
            continue  # not a table: no rows of it to look for
    return rows


def _hidden_data(path: Path) -> bool:
    return path.suffix != ".py" and path.name not in SKIPPED and "__pycache__" not in path.parts


def _table_rows(name: str, data: bytes, *, limit: int = MAX_TASK_ROWS, ids: bool = False) -> Iterator[Row]:
    """The rows of one table file (the first ``limit``), identifier columns left out unless ``ids``."""
    if name.endswith((".npy", ".npz")):
        for array in _arrays(data):
            if array.ndim == 2:
                yield from (tuple(value(v) for v in row) for row in array[:limit])
        return
    text = data.decode("utf-8", errors="replace")
    records = _json_records(text)
    if records is not None:
        for record in records[:limit]:
            if isinstance(record, dict):
                yield tuple(value(v) for k, v in record.items() if ids or not ID_COLUMN.match(str(k)))
            elif isinstance(record, list):
                yield tuple(value(v) for v in record)
        return
    reader = csv.reader(io.StringIO(text), delimiter=_delimiter(text))
    header = next(reader, [])
    numeric_header = all(_is_number(cell) for cell in header)
    keep = [i for i, name in enumerate(header) if ids or numeric_header or not ID_COLUMN.match(name.strip())]
    if numeric_header:  # no header: the first line is a row
        reader = csv.reader(io.StringIO(text), delimiter=_delimiter(text))
    for count, row in enumerate(reader):
        if count >= limit:
            break
        yield tuple(value(row[i]) for i in keep if i < len(row))


def _json_records(text: str) -> list | None:
    stripped = text.lstrip()
    if not stripped.startswith(("[", "{")):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict):  # columns: {"a": [...], "b": [...]} as records
        columns = [v for k, v in data.items() if isinstance(v, list) and not ID_COLUMN.match(str(k))]
        return [list(row) for row in zip(*columns, strict=False)] if columns else []
    return data if isinstance(data, list) else None


def _is_number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def _delimiter(text: str) -> str:
    first = text.split("\n", 1)[0]
    return max(",\t;|", key=first.count)


# -- a package's values -----------------------------------------------------------------------------------------


DECOMPRESSORS = {".gz": lambda f: gzip.GzipFile(fileobj=f), ".bz2": bz2.BZ2File, ".xz": lzma.LZMAFile}


def _read(stream, name: str) -> bytes:
    """A file's bytes, decompressed by its name (at most MAX_READ)."""
    opener = next((make for suffix, make in DECOMPRESSORS.items() if name.endswith(suffix)), None)
    with stream, opener(stream) if opener else stream as readable:
        return readable.read(MAX_READ)


def _inner_name(name: str) -> str:
    for suffix in DECOMPRESSORS:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _arrays(data: bytes) -> Iterator[np.ndarray]:
    try:
        loaded = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile):
        return
    if isinstance(loaded, np.ndarray):
        yield loaded
        return
    with loaded:
        for key in loaded.files:
            try:
                yield loaded[key]
            except (ValueError, OSError, EOFError, zipfile.BadZipFile):
                continue


def package_files(root: Path) -> Iterator[tuple[str, bytes]]:
    """Each file of a package as (name, bytes), decompressed; a zip's members one by one (an .npz stays whole)."""
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        name = path.name.lower()
        if name.endswith(".zip"):
            try:
                with zipfile.ZipFile(path) as archive:
                    for info in archive.infolist():
                        if not info.is_dir():
                            with archive.open(info) as member:
                                yield info.filename.lower(), _read(member, info.filename.lower())
            except (zipfile.BadZipFile, OSError, EOFError, lzma.LZMAError, zlib.error):
                continue
            continue
        try:
            yield _inner_name(name), _read(path.open("rb"), name)
        except (OSError, EOFError, lzma.LZMAError, zlib.error):
            continue


def value_streams(name: str, data: bytes) -> Iterator[list[str]]:
    """A file's values as streams, in the order the file holds them (None for a file read as raw bytes)."""
    if name.endswith((".npy", ".npz")):
        for array in _arrays(data):
            if array.dtype.kind in "biuf":
                yield [value(v) for v in array.ravel()[:MAX_VALUES]]
        return
    if Path(name).suffix not in TEXT_SUFFIXES and b"\0" in data[:4096]:
        return  # binary: searched as raw bytes
    text = data.decode("utf-8", errors="replace")
    records = _json_records(text)
    if records is not None:
        yield list(itertools.islice(_flattened(records), MAX_VALUES))
        return
    reader = csv.reader(io.StringIO(text), delimiter=_delimiter(text))
    yield [value(cell) for cell in itertools.islice(itertools.chain.from_iterable(reader), MAX_VALUES)]


def _flattened(data: object) -> Iterator[str]:
    if isinstance(data, dict):
        for item in data.values():
            yield from _flattened(item)
    elif isinstance(data, list):
        for item in data:
            yield from _flattened(item)
    else:
        yield value(data)


# -- matching ---------------------------------------------------------------------------------------------------


def _found_in_stream(rows: set[Row], stream: list[str]) -> set[Row]:
    """The rows that appear as consecutive values of ``stream``."""
    found: set[Row] = set()
    by_width: dict[int, set[Row]] = {}
    for row in rows:
        by_width.setdefault(len(row), set()).add(row)
    for width, wanted in by_width.items():
        firsts = {row[0] for row in wanted}
        for i in range(len(stream) - width + 1):
            if stream[i] in firsts and (window := tuple(stream[i : i + width])) in wanted:
                found.add(window)
    return found


def _found_unordered(rows: set[Row], table: Iterable[Row]) -> set[Row]:
    """The rows whose values a row of ``table`` holds in any order, with up to ``EXTRA`` more (a label, a row
    number): a copy of the data set with its columns in another order."""
    wanted: dict[Row, list[Row]] = {}
    for row in rows:
        wanted.setdefault(tuple(sorted(row)), []).append(row)
    widths = {len(row) for row in rows}
    found: set[Row] = set()
    for row in table:
        for drop in range(EXTRA + 1 if len(row) <= 12 else 2):
            if len(row) - drop not in widths:
                continue
            for left_out in itertools.combinations(range(len(row)), drop):
                key = tuple(sorted(v for i, v in enumerate(row) if i not in left_out))
                found.update(wanted.get(key, ()))
    return found


def _found_as_bytes(rows: Iterable[Row], data: bytes) -> set[Row]:
    """The numeric rows whose values appear in ``data`` as a float64, float32, int64 or int32 array's bytes."""
    found: set[Row] = set()
    for row in rows:
        try:
            numbers = np.array([float(v) for v in row])
        except ValueError:
            continue
        for dtype in BYTE_TYPES:
            if dtype[1] == "i" and not np.all(numbers == np.round(numbers)):
                continue
            if numbers.astype(dtype).tobytes() in data:
                found.add(row)
                break
    return found


def carried_tasks(package: Path, tasks: dict[str, set[Row]]) -> list[Carried]:
    """The tasks (slug: rows) whose rows ``package`` carries, in the order given."""
    found: dict[str, set[Row]] = {slug: set() for slug in tasks}
    as_bytes: dict[str, tuple[int, int]] = {}  # slug: the best (found, searched) of a binary file
    for name, data in package_files(package):
        try:
            streams = list(value_streams(name, data))
            table = list(_table_rows(name, data, limit=MAX_TABLE_ROWS, ids=True)) if streams else []
        except (csv.Error, ValueError, RecursionError):  # not a table after all (a huge field, deep nesting)
            streams, table = [], []
        for slug, rows in tasks.items():
            for stream in streams:
                found[slug] |= _found_in_stream(rows - found[slug], stream)
            if rows - found[slug]:
                found[slug] |= _found_unordered(rows - found[slug], table)
            if not streams:  # a binary file: a sample of the numeric rows, as raw bytes
                sample = sorted(rows)[:MAX_BYTES_SEARCHED]
                hits = len(_found_as_bytes(sample, data))
                if hits > as_bytes.get(slug, (0, 1))[0]:
                    as_bytes[slug] = (hits, len(sample))
    carried = []
    for slug, rows in tasks.items():
        hits, searched = as_bytes.get(slug, (0, 1))
        if len(rows) < MIN_ROWS:
            continue
        if len(found[slug]) >= max(MIN_ROWS, SHARE * len(rows)):
            carried.append(Carried(slug, len(found[slug]), len(rows)))
        elif hits >= min(MIN_ROWS, searched) and hits >= SHARE * searched:
            carried.append(Carried(slug, hits, searched))
    return carried


def answers_carried(package: Path) -> list[Carried]:
    """The ready tasks whose scored rows ``package`` carries (each task's current version, prepared on this worker
    as its runs would be)."""
    from task_bank.models import Task, TaskVersion

    from ..execution.preparation import TaskPreparationError, task_version_prepare

    tasks: dict[str, set[Row]] = {}
    ready = Task.objects.filter(current_version__status=TaskVersion.Status.READY).select_related("current_version")
    for task in ready.order_by("slug"):
        try:
            prepared = task_version_prepare(task.current_version)
        except TaskPreparationError:
            continue  # a task that cannot be prepared here has no rows to compare (and no runs)
        tasks[task.slug] = task_rows(prepared.root)
    return carried_tasks(package, tasks)
