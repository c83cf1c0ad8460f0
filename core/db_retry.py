"""A write the database did not take because its connection was lost (a restart, a failover, a connection cut by
an operator or a pooler) is tried again on a new connection, for a bounded time, before anything gives up on it.

Only a lost connection: an error the database answered (a statement timeout, a deadlock, a full disk) leaves the
connection usable and is raised at once. Only outside a transaction: inside one, what the transaction did before
the loss is gone too, so the whole transaction is what must be tried again (its caller's choice)."""

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
#: A database's own refusals raise some of these too: ``connection_lost`` tells them apart.
CONNECTION_ERRORS = (OperationalError, InterfaceError)

#: SQLSTATEs of a server that ended the session: a connection exception (class 08), an operator's
#: pg_terminate_backend or a shutdown (57P01), a crash (57P02), a server starting or stopping (57P03), an idle
#: session's time limit (57P05), an idle transaction's (25P03).
LOST_STATES = ("08", "57P01", "57P02", "57P03", "57P05", "25P03")


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the database connection is gone, not that the database refused a statement (a statement
    timeout, a deadlock, a full disk: each has its SQLSTATE). Read from the error itself, not from the connection,
    which something may have opened again since."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError) or connection.vendor == "sqlite":  # a file: no connection to lose
        return False
    state = getattr(exc.__cause__, "sqlstate", None)
    return not state or state.startswith(LOST_STATES)


def db_retried(work: Callable[[], T], *, what: str = "a database write") -> T:
    """``work()``, again on a new connection while the database does not answer, for up to ``BENCH_DB_RETRY_S``
    seconds; then the last error."""
    deadline = time.monotonic() + settings.BENCH_DB_RETRY_S
    delay = 0.2
    while True:
        try:
            return work()
        except CONNECTION_ERRORS as exc:
            if connection.in_atomic_block or time.monotonic() + delay > deadline or not connection_lost(exc):
                raise
            log.warning("%s: the database connection was lost (%s); trying again on a new one", what, exc)
            connection.close()
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
