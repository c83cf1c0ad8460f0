"""Text that goes into the database: PostgreSQL refuses NUL characters in text and JSON, so they are shown
as U+FFFD instead (what agents and their scripts print may hold anything)."""

from __future__ import annotations

from typing import Any


def db_text(value: str) -> str:
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def db_json(value: Any) -> Any:
    """The same value with NULs replaced in every string and key of nested lists and dicts."""
    if isinstance(value, str):
        return db_text(value)
    if isinstance(value, dict):
        return {db_text(str(k)): db_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [db_json(v) for v in value]
    return value
