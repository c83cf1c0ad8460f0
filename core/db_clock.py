"""The database's clock, the one every machine shares. Heartbeats are written in it (``Now()``) and read against it
(``db_now``), so a worker whose own clock is off takes no live run for dead, and no dead one for live."""

from __future__ import annotations

from datetime import datetime

from django.db import connection
from django.utils import timezone


def db_now() -> datetime:
    """The database's time now (SQLite is on this machine: its time is this machine's)."""
    if connection.vendor != "postgresql":
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        return cursor.fetchone()[0]
