"""A write the database did not take because its connection was lost (a restart, a failover, a connection cut by
an operator or a pooler) is tried again on a new connection, for a bounded time, before anything gives up on it.

Only outside a transaction: inside one, what the transaction did before the loss is gone too, so the whole
transaction is what must be tried again (its caller's choice)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

log = logging.getLogger(__name__)

T = TypeVar("T")

#: What a lost connection raises: the server went away (OperationalError) or the connection is closed already.
CONNECTION_LOST = (OperationalError, InterfaceError)


def db_retried(work: Callable[[], T], *, within_s: float | None = None, what: str = "a database write") -> T:
    """``work()``, again on a new connection while the database does not answer, for up to ``within_s`` seconds
    (``BENCH_DB_RETRY_S``); then the last error."""
    within_s = settings.BENCH_DB_RETRY_S if within_s is None else within_s
    deadline = time.monotonic() + within_s
    delay = 0.2
    while True:
        try:
            return work()
        except CONNECTION_LOST as exc:
            if connection.in_atomic_block or time.monotonic() + delay > deadline:
                raise
            log.warning("%s: the database connection was lost (%s); trying again on a new one", what, exc)
            connection.close()
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
