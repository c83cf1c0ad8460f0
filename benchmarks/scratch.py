"""What the benchmarks share: Django set up on throwaway folders and a database given on the command line,
never the deployment's."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEPLOYMENT = ("DATABASE_URL", "BENCH_RUNS_DIR", "BENCH_TASK_CACHE_DIR", "BENCH_BLOB_DIR", "MEDIA_ROOT", "DEBUG")


def django_scratch(prefix: str, database_url: str = "") -> Path:
    """Set Django up with a temporary var folder (blobs, workspaces, the default SQLite database) and
    ``database_url`` if given (a scratch database: it is migrated and written to); returns the var folder."""
    sys.path.insert(0, str(ROOT))
    var = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["BENCH_VAR_DIR"] = str(var)
    for name in DEPLOYMENT:
        os.environ.pop(name, None)  # never the deployment's database or folders by accident
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    return var


@contextlib.contextmanager
def postgres_scratch(server: str, prefix: str) -> Iterator[str]:
    """A throwaway PostgreSQL database on ``server`` (``postgres://user@host:port``) for the length of the block,
    named ``<prefix>_<pid>``; yields its URL and drops it at the end (a SIGTERM to the benchmark too)."""
    import psycopg

    name = f"{prefix}_{os.getpid()}"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    with psycopg.connect(f"{server.rstrip('/')}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{server.rstrip('/')}/{name}"
    finally:
        with psycopg.connect(f"{server.rstrip('/')}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def task_validated(package: Path, slug: str, files: dict[str, str] | None = None):
    """A task package (written from ``files`` {relative path: text} when given) imported and validated here, in this
    process: its validation round's runs measure its baseline. The version, whatever its validation said."""
    from runner.execution import run_execute
    from runner.execution.validation import task_version_validate_queue
    from task_bank.services import task_import

    for rel, text in (files or {}).items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(text)
    version, _ = task_import(root=package, slug=slug)
    for run in task_version_validate_queue(version=version, enqueue=False):
        run_execute(run.pk)
    version.refresh_from_db()
    return version
