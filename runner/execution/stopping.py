"""A stop request to the process that executes a run: a worker's pool process told SIGTERM or SIGINT (Ctrl-C
under ``make run``, and process managers, signal every process). While a run executes, the signal only sets
``requested`` and the run's next tick hands the run back to the queue; before and after, the process's own
handling applies (an idle pool process stops at once)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

requested = threading.Event()
SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _on_signal(signum: int, frame: object) -> None:
    requested.set()


@contextmanager
def busy() -> Iterator[None]:
    """While a run executes here, a stop signal hands it back instead of killing the process."""
    try:
        previous = {signum: signal.signal(signum, _on_signal) for signum in SIGNALS}
    except ValueError:  # not the main thread (a threaded pool): the worker's own shutdown hands runs back
        previous = {}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        requested.clear()
