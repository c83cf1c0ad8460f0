import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("CELERY_BROKER_URL", "")
if not REDIS_URL.startswith("redis://"):
    REDIS_URL = "redis://127.0.0.1:6379/0"


def service_env(**overrides: str) -> dict[str, str]:
    """The environment for a platform process started by a test: ours minus service settings, plus overrides."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "CELERY_QUEUE"}}
    env.update(overrides)
    return env


def start_worker(env: dict[str, str], log_path: Path, queue: str) -> subprocess.Popen:
    log = open(log_path, "wb")  # noqa: SIM115 - handed to the process
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "bench",
            "worker",
            "--loglevel",
            "INFO",
            "--concurrency",
            "1",
            "--queues",
            queue,
            "--without-gossip",
            "--without-mingle",
            "--hostname",
            f"test-{os.getpid()}@%h",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if b" ready." in log_path.read_bytes():
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the worker did not start:\n{log_path.read_text()[-3000:]}")


def stop_worker(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _use_broker(url: str) -> None:
    celery_app.conf.broker_url = url
    if celery_app._pool is not None:
        celery_app._pool.force_close_all()
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@pytest.fixture
def redis_broker(celery_test_queue):
    """Point this process's Celery app at Redis (the worker under test listens there)."""
    old = celery_app.conf.broker_url
    _use_broker(REDIS_URL)
    yield REDIS_URL
    _use_broker(old)


@pytest.fixture
def celery_worker_process(transactional_db, redis_broker, bench_var, celery_test_queue, tmp_path):
    """A real Celery worker process on Redis, using this test's PostgreSQL (or SQLite file) database."""
    from django.db import connection

    db = connection.settings_dict
    if db["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("the worker test shares the test database; it needs DATABASE_URL=postgres://...")
    url = f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    env = service_env(
        DATABASE_URL=url,
        CELERY_BROKER_URL=redis_broker,
        CELERY_QUEUE=celery_test_queue,
        BENCH_VAR_DIR=str(bench_var),
    )
    proc = start_worker(env, tmp_path / "worker.log", celery_test_queue)
    yield proc
    stop_worker(proc)
