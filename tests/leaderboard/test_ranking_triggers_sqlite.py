"""On SQLite, the embedded default, the leaderboard changes when a run ends, as on PostgreSQL: SQLite rebuilds a table
that a migration alters and drops the triggers on it (the runs' among them, after a column was added), so every
migrate installs them again (leaderboard.triggers). A fresh SQLite database, migrated as `make run` migrates it."""

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.factories import package_write

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import django, os
    django.setup()
    from django.test import Client
    from leaderboard.triggers import sqlite_triggers
    from runner.models import Agent, Run
    from task_bank.services import task_import
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        print("missing", sorted(set(sqlite_triggers()) - {row[0] for row in cursor.fetchall()}))
    version, _ = task_import(root=os.environ["TASK_DIR"], slug="tiny")
    version.status, version.baseline_score = "ready", 2.0
    version.save()
    agent = Agent.objects.create(name="solver", entrypoint="x")
    run = Run.objects.create(task=version.task, task_version=version, agent=agent, status="running")
    client = Client()
    print("before", "solver@1" in client.get("/leaderboard/").content.decode())
    Run.objects.filter(pk=run.pk).update(status="finished", final_score=3.0, improvement=0.5, succeeded=True)
    print("after", "solver@1" in client.get("/leaderboard/").content.decode())
    """
)


def test_a_run_that_ends_is_on_the_leaderboard_at_once_on_a_freshly_migrated_sqlite_database(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "BENCH_VAR_DIR": str(tmp_path / "var"),
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "TASK_DIR": str(package_write(tmp_path / "tiny")),
        "PYTHONPATH": str(ROOT),
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:3] == ["missing []", "before False", "after True"], done.stdout + done.stderr
