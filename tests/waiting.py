"""Waiting for another process (a worker, a browser) to get somewhere."""

import time


def wait_for(condition, timeout_s: float, what: str, *, every_s: float = 0.2):
    """Poll ``condition`` until it returns something true, and return that; an AssertionError naming ``what`` after
    ``timeout_s``. A bound on waiting, not an assertion on speed: make it generous."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"gave up waiting for {what} after {timeout_s} s")
