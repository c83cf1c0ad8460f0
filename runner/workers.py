"""Workers as staff see them: each Celery worker records a heartbeat in the database (``Worker``) from a thread of
its main process, every ``BENCH_WORKER_HEARTBEAT_S``, and its clean stop. The row outlives the worker: a worker
that died (SIGKILL, a lost machine) keeps its last heartbeat, and the page calls it lost once that is older than
``BENCH_HEARTBEAT_STALE_S`` (when the reaper also takes its runs for orphaned). Celery's own ``inspect`` would
only show the workers that answer now."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from .models import Run, Worker

log = logging.getLogger(__name__)


def worker_heartbeat(*, name: str, queues: list[str], pid: int, concurrency: int, starting: bool = False) -> None:
    """Record that the worker ``name`` is alive (``starting``: it has just started, a new life of the row)."""
    now = timezone.now()
    fields = {"queues": queues, "pid": pid, "concurrency": concurrency, "heartbeat_at": now, "stopped_at": None}
    if starting:
        Worker.objects.update_or_create(name=name[:200], defaults={**fields, "started_at": now})
    elif not Worker.objects.filter(name=name[:200]).update(**fields):
        Worker.objects.create(name=name[:200], started_at=now, **fields)


def worker_stopped(*, name: str) -> None:
    now = timezone.now()
    Worker.objects.filter(name=name[:200]).update(stopped_at=now, heartbeat_at=now)


class HeartbeatThread(threading.Thread):
    """Beats for a worker until ``stop()``; a database that does not answer is logged and tried again."""

    def __init__(self, *, name: str, queues: list[str], concurrency: int, pid: int) -> None:
        super().__init__(name="worker-heartbeat", daemon=True)
        self.worker = {"name": name, "queues": queues, "concurrency": concurrency, "pid": pid}
        self.stopping = threading.Event()

    def run(self) -> None:
        starting = True
        while not self.stopping.is_set():
            try:
                close_old_connections()
                worker_heartbeat(**self.worker, starting=starting)
                starting = False
            except Exception:  # the database is down for a moment: the next beat tries again
                log.exception("worker %s: the heartbeat could not be recorded", self.worker["name"])
            finally:
                connection.close()
            self.stopping.wait(settings.BENCH_WORKER_HEARTBEAT_S)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=10)


def workers_forget() -> list[str]:
    """Forget the workers not heard of for ``BENCH_WORKER_FORGET_AFTER_S`` (stopped or lost long ago: replaced
    containers, retired machines); the names forgotten. A worker that comes back makes its row again."""
    cutoff = timezone.now() - timedelta(seconds=settings.BENCH_WORKER_FORGET_AFTER_S)
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
    stale = timezone.now() - timedelta(seconds=settings.BENCH_HEARTBEAT_STALE_S)
    workers = list(Worker.objects.all())
    runs: dict[str, list[Run]] = {}
    holding = Run.objects.filter(worker__in=[w.name for w in workers], status__in=Run.ON_WORKER)
    for run in holding.select_related("task", "agent").order_by("pk"):
        runs.setdefault(run.worker, []).append(run)
    views = []
    for worker in workers:
        state = "stopped" if worker.stopped_at is not None else ("alive" if worker.heartbeat_at >= stale else "lost")
        views.append(WorkerView(worker=worker, state=state, runs=runs.get(worker.name, [])))
    order = {"alive": 0, "lost": 1, "stopped": 2}
    return sorted(views, key=lambda v: (order[v.state], v.worker.name))
