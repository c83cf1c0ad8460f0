import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from bench.celery import app as celery_app
from runner.jobs import queue_names
from tests.brokers import use_broker as _use_broker

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("CELERY_BROKER_URL", "")
if not REDIS_URL.startswith("redis://"):
    REDIS_URL = "redis://127.0.0.1:6379/0"


def service_env(**overrides: str) -> dict[str, str]:
    """The environment for a platform process started by a test: ours minus service settings, plus overrides."""
    skip = {"DATABASE_URL", "CELERY_BROKER_URL", "CELERY_QUEUE"}
    env = {k: v for k, v in os.environ.items() if k not in skip}
    env.update(overrides)
    return env


def shared_database_url() -> str:
    """This test's PostgreSQL database, as a URL for a platform process the test starts (which shares it)."""
    from django.db import connection

    db = connection.settings_dict
    if db["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("the worker test shares the test database; it needs DATABASE_URL=postgres://...")
    return f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def start_worker(
    env: dict[str, str], log_path: Path, queue: str, *extra: str, kinds: tuple[str, ...] = ("", "-short", "-gpu")
) -> subprocess.Popen:
    """A Celery worker in its own process group (so a test can kill it and all its children at once), serving
    the queues of ``kinds`` of work: ``queue`` (agent runs) and the short and GPU queues named after it."""
    log = open(log_path, "wb")  # noqa: SIM115 - handed to the process
    command = [sys.executable, "-m", "celery", "-A", "bench", "worker", "--loglevel", "INFO", "--concurrency", "1"]
    command += ["--queues", ",".join(queue + suffix for suffix in kinds), "--without-gossip", "--without-mingle"]
    command += ["--hostname", f"test-{os.getpid()}-{log_path.stem}@%h", *extra]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if b" ready." in log_path.read_bytes():
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    stop_worker(proc)
    raise RuntimeError(f"the worker did not start:\n{log_path.read_text()[-3000:]}")


def stop_worker(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(15)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.fixture
def redis_broker(celery_test_queue):
    """Point this process's Celery app at Redis (the worker under test listens there), with this session's queues
    emptied first: a message left by an earlier test (whose run is gone with its database) would otherwise claim
    this test's run, the first queued, under that message's own time limits."""
    old = celery_app.conf.broker_url
    _use_broker(REDIS_URL)
    redis.Redis.from_url(REDIS_URL).delete(*queue_names())
    yield REDIS_URL
    _use_broker(old)


@pytest.fixture
def worker_env(transactional_db, redis_broker, bench_var, celery_test_queue) -> dict[str, str]:
    """The environment for a worker process on Redis that uses this test's PostgreSQL database."""
    return service_env(
        DATABASE_URL=shared_database_url(),
        CELERY_BROKER_URL=redis_broker,
        CELERY_QUEUE=celery_test_queue,
        BENCH_VAR_DIR=str(bench_var),
        BENCH_JOB_LOG_LEVEL="INFO",  # Celery's line per job: tests see which jobs the worker process ran
    )


@pytest.fixture
def celery_worker_process(worker_env, celery_test_queue, tmp_path):
    """A real Celery worker process on Redis, using this test's PostgreSQL database."""
    proc = start_worker(worker_env, tmp_path / "worker.log", celery_test_queue)
    yield proc
    stop_worker(proc)
