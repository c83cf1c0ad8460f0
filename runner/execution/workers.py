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

The Celery signal handlers at the end of this module do both; ``RunnerConfig.ready`` imports the jobs, which import
this module, so every worker process connects them."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from celery.signals import worker_init, worker_ready, worker_shutdown, worker_shutting_down
from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from ..models import Run, Worker
from . import stopping
from .sandboxes import docker_containers_sweep

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
    holding = Run.objects.on_worker().filter(worker__in=[w.name for w in workers])
    for run in holding.select_related("task", "agent").order_by("pk"):
        runs.setdefault(run.worker, []).append(run)
    views = []
    for worker in workers:
        state = "stopped" if worker.stopped_at is not None else ("alive" if worker.heartbeat_at >= stale else "lost")
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
