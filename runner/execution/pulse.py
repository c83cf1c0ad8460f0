"""A live run's pulse on its worker (``RunSession`` has one): heartbeats (the reaper re-queues a run whose
heartbeats stop), the checks that the run is still this attempt's and that nobody asked it to stop (a cancel, a
hand-back), the wall-time limit, and the live output of the running action that the run's page shows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db.models import F
from django.db.models.functions import Now

from core.db_clock import db_now
from core.db_retry import db_retried

from ..models import Run
from ..sandbox.process import HeadTail
from ..text import db_text
from . import stopping
from .endings import Cancelled, HandBack, LostOwnership, OutOfTime

LIVE_OUTPUT_BYTES = 8000


class RunPulse:
    """The ticking of one attempt of a run: ``tick`` is called often by everything that waits."""

    def __init__(self, run: Run, *, parent: RunPulse | None = None) -> None:
        self.run = run
        self.parent = parent  # the run waiting for this one (a benchmark run validating its task): it keeps beating
        self.attempt = run.attempt
        now = db_now()  # the clock the run's start was written in
        elapsed = (now - (run.started_at or now)).total_seconds() - run.paused_seconds
        self.deadline = time.monotonic() + max(run.max_time_s - elapsed, 0)
        self.live = HeadTail(LIVE_OUTPUT_BYTES)
        self.live_dirty = False
        self._last_check = self._last_beat = self._last_live = 0.0

    @contextmanager
    def time_not_counted(self) -> Iterator[None]:
        """Time spent in the block is not the run's (waiting for its task's validation): the time limit is suspended
        meanwhile and moved on by as long, and ``Run.paused_seconds`` grows by it, so the run's wall time and a
        resumed attempt's deadline leave it out too. Waiting is never charged."""
        deadline, started = self.deadline, time.monotonic()
        self.deadline = math.inf
        try:
            yield
        finally:
            spent = time.monotonic() - started
            self.deadline = deadline + spent
            self.write(paused_seconds=F("paused_seconds") + spent)

    def time_limit_end(self) -> None:
        """The run's time limit is over with the agent's work: what it left is evaluated on the evaluation's own
        timeout, however the conversation ended (a timed-out run is scored too)."""
        self.deadline = math.inf

    def beat(self) -> None:
        """Tell the reaper this run's worker is alive (a run waiting for a nested validation run)."""
        now = time.monotonic()
        if now - self._last_beat >= settings.BENCH_HEARTBEAT_S:
            self._last_beat = now
            self.write(heartbeat_at=Now())
        if self.parent is not None:
            self.parent.beat()

    def tick(self) -> None:
        """Called often by everything that waits: raises LostOwnership or a RunInterrupted when the run must stop."""
        now = time.monotonic()
        if self.parent is not None:
            self.parent.beat()
        if stopping.requested.is_set():
            raise HandBack()
        if now - self._last_check >= 1.0:
            self.check()
        if now >= self.deadline:
            raise OutOfTime()
        if now - self._last_beat >= settings.BENCH_HEARTBEAT_S or (self.live_dirty and now - self._last_live >= 2):
            self._last_beat = self._last_live = now
            fields = {"heartbeat_at": Now()}
            if self.live_dirty:
                fields["live_output"] = db_text(self.live.text())
                self.live_dirty = False
            self.write(**fields)

    def write(self, **fields) -> int:
        """Update the run's row while it is this attempt's (how many rows: 0 when it is not), a lost database
        connection tried again in place (``core.db_retry``)."""
        mine = Run.objects.filter(pk=self.run.pk, attempt=self.attempt)
        return db_retried(lambda: mine.update(**fields), what=f"run {self.run.pk}")

    def check(self) -> None:
        """Is the run still this attempt's, and should it go on? (LostOwnership, Cancelled, HandBack)"""
        self._last_check = time.monotonic()
        fields = ("status", "attempt", "cancel_requested_at", "hand_back_requested_at")
        row = db_retried(lambda: Run.objects.filter(pk=self.run.pk).values(*fields).first(), what=f"run {self.run.pk}")
        if row is None or row["attempt"] != self.attempt or row["status"] not in Run.LIVE:
            raise LostOwnership()
        if row["cancel_requested_at"] is not None:
            raise Cancelled()
        if row["hand_back_requested_at"] is not None:
            raise HandBack()

    def show_live(self, what: str) -> None:
        """Say what the run is doing (its page shows it while the run is live), its output starting afresh."""
        self.live_clear()
        self.write(live_action=db_text(what), live_output="")

    def live_clear(self) -> None:
        """Start the live output afresh (for the next action), without telling the page yet."""
        self.live = HeadTail(LIVE_OUTPUT_BYTES)
        self.live_dirty = False

    def on_output(self, stream: str, data: bytes) -> None:
        self.live.write(data)
        self.live_dirty = True
