"""Workers as staff see them: each Celery worker records a heartbeat in the database (``Worker``) from a thread of
its main process, every ``BENCH_WORKER_HEARTBEAT_S``, and its clean stop. The row outlives the worker: a worker
that died (SIGKILL, a lost machine) keeps its last heartbeat, and the page calls it lost once that is older than
``BENCH_HEARTBEAT_STALE_S`` (when the reaper also takes its runs for orphaned). Celery's own ``inspect`` would
only show the workers that answer now.

A worker told to stop (SIGTERM, or Ctrl-C under ``make run``) hands its runs back: each notices within a second,
stops what it runs and goes back to the queue, first in line, to be resumed from its last recorded step by the
next worker; the worker then exits. It starts nothing new meanwhile: a message it still takes is sent again. A
worker killed outright (SIGKILL, a lost machine) hands nothing back: its runs wait for the reaper, which queues
them again once their heartbeat is stale (``BENCH_HEARTBEAT_STALE_S``).

The same thread offers the periodic passes (``periodic_passes``): the reaper and the sweep of its host's scratch
folders, run in the thread, and the blob collector's job, sent to the short queue. Every worker offers them; the
shared counter gives each period's pass to one. No worker is special, so killing any one leaves recovery to the
others.

The Celery signal handlers at the end of this module do both; ``RunnerConfig.ready`` imports the jobs, which import
this module, so every worker process connects them."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from celery import current_app
from celery.signals import worker_init, worker_ready, worker_shutdown, worker_shutting_down
from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.db.models.functions import Now
from django.utils import timezone

from core.db_clock import db_now
from core.shared_cache import count_hit

from ..models import Run, Worker
from . import stopping
from .sandboxes import docker_containers_sweep

log = logging.getLogger(__name__)


def worker_heartbeat(*, name: str, queues: list[str], pid: int, concurrency: int, starting: bool = False) -> None:
    """Record that the worker ``name`` is alive (``starting``: it has just started, a new life of the row)."""
    now = Now()  # the database's clock, which every worker shares (``core.db_clock``)
    fields = {"queues": queues, "pid": pid, "concurrency": concurrency, "heartbeat_at": now, "stopped_at": None}
    if starting:
        Worker.objects.update_or_create(name=name[:200], defaults={**fields, "started_at": now})
    elif not Worker.objects.filter(name=name[:200]).update(**fields):
        Worker.objects.create(name=name[:200], started_at=now, **fields)


def worker_stopped(*, name: str) -> None:
    Worker.objects.filter(name=name[:200]).update(stopped_at=Now(), heartbeat_at=Now())


def reap_pass() -> None:
    from .reaper import runs_reap  # the reaper forgets old workers: it imports this module

    done = runs_reap()
    if any(done.values()):
        log.info("reaper: %s", {what: ids for what, ids in done.items() if ids})


def scratch_pass() -> None:
    """This host's scratch folders that no live attempt uses go (``reaper.scratch_sweep``): each host sweeps its own
    disk, whichever worker reaps."""
    from .reaper import scratch_sweep

    swept = scratch_sweep()
    if swept:
        log.info("scratch folders of ended attempts removed: %s", [str(path) for path in swept])


def collect_send() -> None:
    """The blob collector runs as a job on the short queue, under its time limits (``tasks.collect_blobs``)."""
    from ..jobs import COLLECT_BLOBS

    current_app.send_task(COLLECT_BLOBS, expires=settings.BENCH_BLOB_COLLECT_EVERY_S)


def periodic_passes() -> list[tuple[str, float, Callable[[], None]]]:
    """What every worker's heartbeat thread offers to do once a period: (name, period in seconds, the pass). One
    worker a period runs each; the scratch sweep's name is its host's, so one worker on each host runs it."""
    return [
        ("reap-runs", settings.BENCH_REAPER_EVERY_S, reap_pass),
        (f"sweep-scratch:{socket.gethostname()}", settings.BENCH_REAPER_EVERY_S, scratch_pass),
        ("collect-blobs", settings.BENCH_BLOB_COLLECT_EVERY_S, collect_send),
    ]


def periodic_claim(name: str, window_s: int) -> bool:
    """Whether this worker takes the pass of the current window of ``window_s`` seconds: the first of all workers to
    count it in the shared counter (``core.shared_cache.count_hit``, one atomic increment), so two never run the
    same window's pass. The window is the database's clock's, so workers whose own clocks differ agree on it."""
    count, _ = count_hit(f"periodic:{name}", window_s=window_s, now=db_now().timestamp())
    return count == 1


class HeartbeatThread(threading.Thread):
    """Beats for a worker until ``stop()``, and offers the periodic passes (``periodic_passes``): every worker runs
    them, one pass a period across all of them, so recovery lives as long as any worker does. A database that does
    not answer is logged and tried again."""

    def __init__(self, *, name: str, queues: list[str], concurrency: int, pid: int) -> None:
        super().__init__(name="worker-heartbeat", daemon=True)
        self.worker = {"name": name, "queues": queues, "concurrency": concurrency, "pid": pid}
        self.stopping = threading.Event()
        self.next_pass: dict[str, float] = {}

    def run(self) -> None:
        starting = True
        next_beat = 0.0
        while not self.stopping.is_set():
            try:
                close_old_connections()
                if time.time() >= next_beat:
                    worker_heartbeat(**self.worker, starting=starting)
                    starting = False
                    next_beat = time.time() + settings.BENCH_WORKER_HEARTBEAT_S
                self.passes()
            except Exception:  # the database is down for a moment: the next beat tries again
                log.exception("worker %s: the heartbeat or a periodic pass failed", self.worker["name"])
                next_beat = time.time() + settings.BENCH_WORKER_HEARTBEAT_S
            finally:
                connection.close()
            self.stopping.wait(max(0.05, min([next_beat, *self.next_pass.values()]) - time.time()))

    def passes(self) -> None:
        """Each pass whose period has begun since this worker last offered it, if no worker has claimed it."""
        for name, period_s, work in periodic_passes():
            now = time.time()
            if now < self.next_pass.get(name, 0.0):
                continue
            window_s = max(1, round(period_s))
            self.next_pass[name] = (now // window_s + 1) * window_s  # the next window's start
            if periodic_claim(name, window_s):
                try:
                    work()
                except Exception:
                    log.exception("worker %s: the periodic pass %s failed", self.worker["name"], name)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=10)


def workers_forget() -> list[str]:
    """Forget the workers not heard of for ``BENCH_WORKER_FORGET_AFTER_S`` (stopped or lost long ago: replaced
    containers, retired machines); the names forgotten. A worker that comes back makes its row again."""
    cutoff = Now() - timedelta(seconds=settings.BENCH_WORKER_FORGET_AFTER_S)  # heartbeats are in the database's clock
    old = Worker.objects.filter(heartbeat_at__lt=cutoff)
    names = list(old.values_list("name", flat=True))
    old.delete()
    return names


@dataclass
class WorkerView:
    worker: Worker
    state: str  # "alive", "stopped" or "lost"
    runs: list[Run] = field(default_factory=list)


def workers_overview() -> list[WorkerView]:
    """Every worker known, with its state and the live runs it holds (two queries)."""
    fresh = Q(heartbeat_at__gte=Now() - timedelta(seconds=settings.BENCH_HEARTBEAT_STALE_S))  # the database's clock
    workers = list(Worker.objects.annotate(fresh=ExpressionWrapper(fresh, output_field=BooleanField())))
    runs: dict[str, list[Run]] = {}
    holding = Run.objects.on_worker().filter(worker__in=[w.name for w in workers])
    for run in holding.select_related("task", "agent").order_by("pk"):
        runs.setdefault(run.worker, []).append(run)
    views = []
    for worker in workers:
        state = "stopped" if worker.stopped_at is not None else ("alive" if worker.fresh else "lost")
        views.append(WorkerView(worker=worker, state=state, runs=runs.get(worker.name, [])))
    order = {"alive": 0, "lost": 1, "stopped": 2}
    return sorted(views, key=lambda v: (order[v.state], v.worker.name))


def _stopping_marker(pid: int) -> Path:
    """Present while the worker whose main process is ``pid`` is stopping (its pool processes look for it)."""
    return Path(settings.BENCH_RUNS_DIR) / f".worker-stopping-{pid}"


def worker_stopping() -> bool:
    """Is the worker this job runs in stopping? (The job runs in the main process or in one of its children.)"""
    return stopping.requested.is_set() or any(_stopping_marker(pid).exists() for pid in {os.getpid(), os.getppid()})


@worker_init.connect
@worker_shutdown.connect
def forget_stopping(**kwargs) -> None:
    _stopping_marker(os.getpid()).unlink(missing_ok=True)


@worker_init.connect
def sweep_sandbox_containers(**kwargs) -> None:
    """Containers of the docker sandbox whose worker process died (their removal cut short, or the whole worker
    killed) are removed when a worker starts; those of live workers stay."""
    if settings.BENCH_SANDBOX == "docker":
        removed = docker_containers_sweep()
        if removed:
            log.info("removed %d sandbox containers left by dead workers", removed)


@worker_shutting_down.connect
def hand_back_runs(sender=None, **kwargs) -> None:
    """Celery's warm shutdown (SIGTERM to the worker): mark the worker's runs ``hand_back_requested_at`` (their
    sessions notice within a second and hand them back) and leave the stopping marker its pool processes look for
    (``worker_stopping``). A signal that reaches a pool process itself is ``stopping.busy``'s."""
    marker = _stopping_marker(os.getpid())
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    Run.objects.on_worker().filter(worker=str(sender)).update(hand_back_requested_at=timezone.now())


_heartbeat: HeartbeatThread | None = None


@worker_ready.connect
def heartbeat_start(sender=None, **kwargs) -> None:
    """The worker records a heartbeat (runner.execution.workers) from its main process while it lives."""
    global _heartbeat
    queues = sorted(sender.app.amqp.queues.consume_from)
    concurrency = getattr(getattr(sender, "controller", None), "concurrency", None) or 1
    _heartbeat = HeartbeatThread(name=sender.hostname, queues=queues, concurrency=concurrency, pid=os.getpid())
    _heartbeat.start()


@worker_shutdown.connect
def heartbeat_stop(sender=None, **kwargs) -> None:
    global _heartbeat
    if _heartbeat is None:
        return
    _heartbeat.stop()
    try:
        worker_stopped(name=_heartbeat.worker["name"])
    except Exception:  # the database is gone: the page will call the worker lost instead of stopped
        log.exception("worker %s: its stop could not be recorded", _heartbeat.worker["name"])
    _heartbeat = None
