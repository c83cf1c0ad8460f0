"""Text that goes into the database: PostgreSQL refuses NUL characters in text and JSON, so they are shown
as U+FFFD instead, and a lone surrogate (a file name that is not UTF-8, decoded by Python with
surrogateescape, or one an agent wrote in JSON) as its escape, ``\\udcff`` (what agents and their scripts print
may hold anything)."""

from __future__ import annotations

import difflib
from typing import Any


def db_text(value: str) -> str:
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def db_json(value: Any) -> Any:
    """The same value with NULs replaced in every string and key of nested lists and dicts."""
    if isinstance(value, str):
        return db_text(value)
    if isinstance(value, dict):
        return {db_text(str(k)): db_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [db_json(v) for v in value]
    return value


def unified_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    """A unified diff of two texts, line by line (each line's ending kept)."""
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), old_name, new_name)
    return "".join(lines)
