"""The leaderboard and the runs list at scale: ``--runs`` runs (100,000 by default) over 12 tasks and 16 agents
(4 with a model, so 20 leaderboard rows), most of them counted, some queued, cancelled, forked or infrastructure
failures, written with bulk inserts into a throwaway PostgreSQL database that this script creates and drops.
Then the pages are timed through the Django test client as an anonymous visitor (``/metrics`` as a scraper with
its token): medians of ``--rounds`` rounds after one warm-up request each.

    .venv/bin/python benchmarks/lists_at_scale.py [--runs 100000] [--rounds 7] \\
        [--server postgres://postgres@127.0.0.1:5432] [--keep | --reuse bench_scale_NNN]

The database is named ``bench_scale_<pid>`` on ``--server`` (never the deployment's: DATABASE_URL is ignored).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def populate(*, runs: int) -> None:
    from django.utils import timezone

    from runner.models import Agent, Run
    from task_bank.models import Task, TaskVersion

    rng = random.Random(0)
    tasks = []
    for i in range(12):
        task = Task.objects.create(slug=f"task-{i:02}", title=f"Task {i}", category="canonical")
        version = TaskVersion.objects.create(
            task=task, number=1, digest="0" * 64, package_path="/nonexistent", research_problem="Improve it.",
            status="ready", baseline_score=1.0, reference_score=2.0,
        )  # fmt: skip
        Task.objects.filter(pk=task.pk).update(current_version=version)
        tasks.append((task.pk, version.pk))
    agents = [Agent.objects.create(name=f"agent-{i:02}", entrypoint="scripted_agent") for i in range(16)]
    entrants = [(a.pk, "") for a in agents] + [(a.pk, "gpt-test") for a in agents[:4]]
    start = timezone.now() - timedelta(days=60)
    batch = []
    statuses = ["finished"] * 80 + ["failed"] * 12 + ["timed_out"] * 3 + ["cancelled"] * 2 + ["queued"] * 2
    statuses.append("running")
    for n in range(runs):
        agent, model = rng.choice(entrants)
        task, version = rng.choice(tasks)
        status = rng.choice(statuses)
        failure = ""
        if status == "failed":
            failure = "infrastructure" if rng.random() < 0.2 else "agent"
        ended = status in Run.ENDED
        scored = status == "finished"
        improvement = rng.gauss(0.05, 0.2) if scored else None
        batch.append(
            Run(
                task_id=task, task_version_id=version, agent_id=agent, model=model, status=status,
                failure_kind=failure, final_score=1.0 + improvement if scored else None, improvement=improvement,
                succeeded=(improvement or 0) > 0.1 if ended else None, steps_count=rng.randint(1, 50),
                tokens_in=rng.randint(0, 50_000) if model else 0, tokens_out=rng.randint(0, 5_000) if model else 0,
                cost=round(rng.random() * 0.5, 6) if model else 0, wall_seconds=rng.random() * 3600,
                # Runs of one batch share a second: equal timestamps are common, as bench_run writes them.
                created_at=start + timedelta(seconds=n // 4 * 50),
            )
        )  # fmt: skip
        if len(batch) == 5000:
            Run.objects.bulk_create(batch)
            batch = []
    Run.objects.bulk_create(batch)
    first = Run.objects.order_by("pk").first()
    forks = list(Run.objects.filter(status="finished").order_by("pk")[: runs // 100].values_list("pk", flat=True))
    Run.objects.filter(pk__in=forks).update(forked_from=first, fork_step=0)
    # auto_now_add overrode created_at: set it again from the id, four runs per timestamp.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runner_run SET created_at = %s + ((id - %s) / 4) * interval '50 seconds'", [start, first.pk]
        )
        cursor.execute("VACUUM ANALYZE")


def ranking_write() -> None:
    """What a run ending does to the leaderboard's cache: a new ranking generation (nothing where there is none)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('leaderboard_rankinggeneration') IS NOT NULL")
        if cursor.fetchone()[0]:
            cursor.execute("UPDATE leaderboard_rankinggeneration SET number = number + 1")


def timed(client, url: str, *, rounds: int, cold: bool = False) -> tuple[float, int, int]:
    """The median time of ``rounds`` GETs of ``url`` (after a warm-up), its response size and its queries; with
    ``cold``, each after a ranking write (``ranking_write``, not timed), as the first view after a run ends."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    times = []
    for _ in range(rounds):
        if cold:
            ranking_write()
        started = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - started)
    if cold:
        ranking_write()
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    return statistics.median(times) * 1000, len(response.content), len(queries)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432", help="a PostgreSQL server")
    parser.add_argument("--keep", action="store_true", help="keep the database (to look at its plans), named here")
    parser.add_argument("--reuse", default="", help="time the pages on a database a --keep run left, then drop it")
    args = parser.parse_args()
    name = args.reuse or f"bench_scale_{os.getpid()}"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a stopped benchmark still drops its database
    var = Path(tempfile.mkdtemp(prefix="listsbench-"))
    os.environ["BENCH_VAR_DIR"] = str(var)
    for key in ("DATABASE_URL", "BENCH_RUNS_DIR", "BENCH_TASK_CACHE_DIR", "BENCH_BLOB_DIR", "MEDIA_ROOT"):
        os.environ.pop(key, None)  # never the deployment's database or folders by accident
    os.environ["DATABASE_URL"] = f"{args.server.rstrip('/')}/{name}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    os.environ["DEBUG"] = "0"
    import django
    import psycopg

    if not args.reuse:
        with psycopg.connect(f"{args.server.rstrip('/')}/postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    try:
        django.setup()
        from django.conf import settings
        from django.core.management import call_command
        from django.db import connection
        from django.test import Client
        from django.test.utils import setup_test_environment

        settings.ALLOWED_HOSTS = ["*"]
        setup_test_environment()
        call_command("migrate", verbosity=0)
        from runner.models import Run

        if args.reuse:
            args.runs = Run.objects.count()
        else:
            started = time.perf_counter()
            populate(runs=args.runs)
            print(f"{args.runs:,} runs written in {time.perf_counter() - started:.1f} s (database {name})")

        client = Client()
        newest = Run.objects.order_by("-created_at", "-pk")
        deep = newest.values_list("pk", flat=True)[args.runs * 9 // 10]
        pages = [
            ("/leaderboard/", "/leaderboard/"),
            ("/leaderboard/ after a run ended", "/leaderboard/"),
            ("/leaderboard/ (table only, htmx)", "/leaderboard/?sort=runs"),
            ("/runs/ page 1", "/runs/"),
            ("/runs/ 90% deep", deep_url(deep)),
            ("/runs/?status=queued", "/runs/?status=queued"),
            ("/runs/?task=task-03", "/runs/?task=task-03"),
            ("/api/v1/runs/", "/api/v1/runs/"),
            ("/api/v1/runs/ 90% deep", f"/api/v1/runs/?{deep_api(deep, args.runs)}"),
            ("/tasks/task-03/", "/tasks/task-03/"),
            ("/metrics (a scrape)", "/metrics"),
        ]
        settings.BENCH_METRICS_TOKEN = "benchmark"
        print(f"median of {args.rounds} rounds, anonymous visitor, PostgreSQL {connection.pg_version}")
        for label, url in pages:
            headers = {"HTTP_HX_REQUEST": "true"} if "htmx" in label else {}
            if url == "/metrics":
                headers = {"HTTP_AUTHORIZATION": "Bearer benchmark"}
            if headers:
                client.defaults.update(headers)
            ms, size, queries = timed(client, url, rounds=args.rounds, cold="after a run ended" in label)
            client.defaults.clear()
            print(f"  {label:<34} {ms:8.1f} ms  {size / 1000:8.1f} kB  {queries:3} queries   {url}")
        connection.close()
    finally:
        if args.keep:
            print(f"kept database {name}: --reuse {name} times it again and drops it")
        else:
            with psycopg.connect(f"{args.server.rstrip('/')}/postgres", autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def deep_url(pk: int) -> str:
    """The runs list from run ``pk`` on: ?page= with offset pagination, ?before= with keyset pagination."""
    from runner.views import runs as views

    if getattr(views, "RUNS_PAGE_SIZE", None):
        return f"/runs/?before={pk}"
    return "/runs/?page=1800"


def deep_api(pk: int, runs: int) -> str:
    from core import pagination

    if hasattr(pagination, "BeforeOrOffsetPagination"):
        return f"before={pk}"
    return f"offset={runs * 9 // 10}"


if __name__ == "__main__":
    main()
