"""Reading pages while a batch writes steps: a bounded load generator on loopback against gunicorn.

The Procfile's web line (gunicorn) and worker line (``procfile.py``) run on a throwaway PostgreSQL database and
a Redis queue of their own. The database holds ``--history`` finished runs of 4 agents (so the leaderboard has
rows), and a batch of ``--runs`` long runs executes on ``--workers`` workers: each run writes a step every few
hundred milliseconds (Execute Script of a short script, then the next). Once a run of the batch is live,
``--clients`` clients, each one keep-alive connection to 127.0.0.1, request in turn the leaderboard, the runs
list and that live run's page, each the next request as soon as the last one answered, for ``--duration``
seconds (each request also bounded by ``--timeout``). Every page was requested once before the clock starts.
Printed: throughput, p50 and p99 latency, the failed requests (an error, a timeout or any status but 200), per
page and overall, the steps the batch wrote meanwhile, and the load average.

    .venv/bin/python benchmarks/load.py [--clients 8] [--duration 30] [--runs 2] [--workers 2] [--history 200] \\
        [--server postgres://postgres@127.0.0.1:5432] [--broker redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import http.client
import random
import shutil
import socket
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from procfile import process_stop, web_start
from scale_out import act, load, platform_setup, scripted_agent, task_ready, workers_start
from scratch import postgres_scratch

HOST = "127.0.0.1"  # loopback only: the load goes nowhere else
STEP = "import time\ntime.sleep(0.1)\nprint('step')\n"


@dataclass
class Answer:
    page: str
    started: float
    seconds: float
    status: int  # 0: no answer (an error or a timeout)
    size: int


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def history_write(*, task_version, runs: int) -> None:
    """Finished runs of four agents on the task, scored around its baseline, for the leaderboard to rank."""
    from runner.models import Agent, Run

    rng = random.Random(0)
    agents = [Agent.objects.create(name=f"history-{i}", entrypoint="scripted_agent") for i in range(4)]
    baseline = task_version.baseline_score
    rows = []
    for n in range(runs):
        score = baseline * (1 + rng.gauss(0.05, 0.2))
        improvement = (score - baseline) / abs(baseline)
        rows.append(
            Run(
                task=task_version.task, task_version=task_version, agent=agents[n % 4], status="finished",
                final_score=score, improvement=improvement, succeeded=improvement > 0.1, attempt=1,
                steps_count=rng.randint(1, 50), wall_seconds=rng.random() * 3600,
            )
        )  # fmt: skip
    Run.objects.bulk_create(rows)


def client(
    port: int, pages: list[tuple[str, str]], offset: int, until: float, timeout: float, out: list, most: int = 0
) -> None:
    """Request the pages in turn, from ``offset``, until ``until`` (time.monotonic), or ``most`` requests."""
    conn = None
    i = offset
    while time.monotonic() < until and not (most and i - offset >= most):
        page, url = pages[i % len(pages)]
        i += 1
        started = time.monotonic()
        status, size = 0, 0
        try:
            if conn is None:
                conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
            conn.request("GET", url)
            response = conn.getresponse()
            size = len(response.read())
            status = response.status
            if response.getheader("connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException):
            if conn is not None:
                conn.close()
            conn = None
        out.append(Answer(page, started, time.monotonic() - started, status, size))
    if conn is not None:
        conn.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] if ordered else float("nan")


def report(label: str, answers: list[Answer], duration: float) -> str:
    seconds = [a.seconds for a in answers]
    failed = sum(a.status != 200 for a in answers)
    size = statistics.median(a.size for a in answers) if answers else 0
    return (
        f"  {label:<18} {len(answers):6} requests {len(answers) / duration:7.1f} req/s   "
        f"p50 {percentile(seconds, 0.5) * 1000:7.1f} ms   p99 {percentile(seconds, 0.99) * 1000:7.1f} ms   "
        f"failed {failed}   median size {size / 1000:.1f} kB"
    )


def measure(args: argparse.Namespace, var: Path, env: dict[str, str]) -> None:
    version = task_ready(var)
    history_write(task_version=version, runs=args.history)
    script = [act("Write File", file_name="step.py", content=STEP)]
    script += [act("Execute Script", script_name="step.py") for _ in range(args.steps)]
    agent = scripted_agent("steps-writer", script + [act("Final Answer", final_answer="done")])
    from runner.models import Run, RunSpec, Step
    from runner.services import batch_create, run_cancel

    port = free_port()
    logs = var / "logs"
    workers = workers_start(env, args.workers, logs, "load")
    web = None
    try:
        web = web_start(dict(env, BENCH_HOST=HOST, BENCH_PORT=str(port)), log_path=logs / "web.log")
        batch, _ = batch_create(spec=RunSpec(agent), tasks=[version.task], repeats=args.runs)
        deadline = time.monotonic() + 300
        live = None
        while live is None:
            live = Run.objects.filter(batch=batch, status="running", steps_count__gte=2).first()
            if time.monotonic() > deadline:
                raise SystemExit("no run of the batch went live within 300 s")
            time.sleep(0.2)
        pages = [
            ("/leaderboard/", "/leaderboard/"),
            ("/runs/", "/runs/"),
            ("live run page", f"/runs/{live.pk}/"),
        ]
        warm: list[Answer] = []
        client(port, pages, 0, time.monotonic() + 600, args.timeout, warm, most=len(pages))
        print(f"{args.history} finished runs, a batch of {args.runs} runs on {args.workers} worker(s); "
              f"{args.clients} clients for {args.duration:.0f} s on gunicorn (the Procfile's web line), "
              f"port {port}; load average {load()}")  # fmt: skip
        if any(a.status != 200 for a in warm):
            print("  warm-up answers:", [(a.page, a.status) for a in warm])

        answers: list[Answer] = []
        steps_before = Step.objects.filter(run__batch=batch).count()
        started = time.monotonic()
        until = started + args.duration
        threads = [
            threading.Thread(target=client, args=(port, pages, i, until, args.timeout, answers))
            for i in range(args.clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        steps = Step.objects.filter(run__batch=batch).count() - steps_before
        still_live = Run.objects.filter(pk=live.pk, status="running").exists()
        print(report("all pages", answers, elapsed))
        for page, _ in pages:
            print(report(page, [a for a in answers if a.page == page], elapsed))
        statuses = sorted({a.status for a in answers})
        print(f"  statuses {statuses}; the batch wrote {steps} steps meanwhile ({steps / elapsed:.1f} a second);"
              f" the run page's run {'still live' if still_live else 'had ended'} at the end; "
              f"load average {load()}")  # fmt: skip
        for run in Run.objects.filter(batch=batch):
            run_cancel(run=run)
    finally:
        if web is not None:
            process_stop(web)
        for proc in workers:
            process_stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds one request may take")
    parser.add_argument("--runs", type=int, default=2, help="runs of the batch that writes steps meanwhile")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1000, help="steps each run of the batch would take")
    parser.add_argument("--history", type=int, default=200, help="finished runs in the database")
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/15")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # each figure as it is measured, also into a pipe
    if not (1 <= args.clients <= 64 and 0 < args.duration <= 600):
        parser.error("--clients must be 1 to 64 and --duration above 0 and at most 600 seconds")

    with postgres_scratch(args.server, "bench_load") as database_url:
        var, env = platform_setup(database_url=database_url, broker=args.broker, prefix="load")
        try:
            measure(args, var, env)
        finally:
            from django.db import connections

            connections.close_all()
            shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    main()
