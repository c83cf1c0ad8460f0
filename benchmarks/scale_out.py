"""Scale-out: a batch of short runs on one worker and on two, against the same work done by bare scripts.

Each run of the batch is a scripted agent on a tiny task: it writes ``work.py`` (a fixed CPU loop, about
``--work-s`` seconds of CPU on this machine, calibrated at the start), executes it ``--executions`` times through the
platform (Execute Script in the bwrap sandbox), writes its answer and ends; the task's eval.py scores it. The
workers are the Procfile's worker line (``procfile.py``), on a throwaway PostgreSQL database and a Redis queue
of their own. The bare scripts do the same work directly: ``work.py`` run once per execution of the batch, one
after another in one lane, or split over two lanes at once. Rounds alternate the order (1, 2, 2, 1, ...), so a
change of load hits both sides alike. Printed: each measurement's wall time and load average, the median
speed-ups, and the ratio (the platform's speed-up over the bare scripts'; the goal is at least 0.95).

    .venv/bin/python benchmarks/scale_out.py [--runs 20] [--rounds 3] [--work-s 1.0] [--executions 1] \\
        [--server postgres://postgres@127.0.0.1:5432] [--broker redis://127.0.0.1:6379/15]

A batch's wall time runs from the moment it is queued to the last run's ``finished_at``; the workers were
started and each ran one warm-up run before. Every run must finish on its first attempt, or the round says so.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from procfile import ROOT, process_env, process_stop, worker_start
from scratch import django_scratch, postgres_scratch, task_validated

PACKAGE = {
    "task.toml": (
        'title = "Scale"\ncategory = "canonical"\n[metric]\nname = "value"\nhigher_is_better = true\n'
        "[limits]\nmax_steps = 2000\nmax_time_s = 3600\n"
    ),
    "scripts/research_problem.txt": "Make value.txt hold a larger number than train.py writes.",
    "scripts/eval.py": (
        "import os\n\ndef get_score(submission_folder='../env'):\n"
        "    with open(os.path.join(submission_folder, 'value.txt')) as fh:\n        return float(fh.read())\n"
    ),
    "env/train.py": "with open('value.txt', 'w') as fh:\n    fh.write('2.0')\n",
}
WORK = "total = 0\nfor i in range({n}):\n    total += i * i\nprint('work done', total)\n"
SCRIPTED_AGENT = ROOT / "tests" / "agents"  # the scripted agent: it sends the actions of its config, in order


def act(action: str, **args) -> dict:
    return {"type": "act", "action": action, "input": args}


def run_script(work: str, *, executions: int, extra: list[dict] | None = None) -> list[dict]:
    steps = [act("Write File", file_name="work.py", content=work)]
    steps += [act("Execute Script", script_name="work.py") for _ in range(executions)] + (extra or [])
    return steps + [act("Write File", file_name="value.txt", content="3"), act("Final Answer", final_answer="done")]


def platform_setup(*, database_url: str, broker: str, prefix: str) -> tuple[Path, dict[str, str]]:
    """Django on the scratch database and broker (migrated), a queue of this process only; returns the var
    folder and the environment of the platform processes started for it."""
    queue = f"{prefix}-{os.getpid()}"
    os.environ["CELERY_BROKER_URL"] = broker
    os.environ["CELERY_QUEUE"] = queue
    var = django_scratch(f"{prefix}-", database_url)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    env = process_env(DATABASE_URL=database_url, CELERY_BROKER_URL=broker, CELERY_QUEUE=queue, BENCH_VAR_DIR=str(var))
    return var, env


def task_ready(var: Path):
    """The tiny task, imported and validated (its baseline measured here, in this process)."""
    version = task_validated(var / "package", "scale", PACKAGE)
    if version.status != "ready":
        raise SystemExit(f"the task did not validate: {version.status} {version.baseline_scores}")
    return version


def scripted_agent(name: str, script: list[dict]):
    from runner.models import Agent

    return Agent.objects.create(
        name=name, kind="package", entrypoint="scripted_agent", package_path=str(SCRIPTED_AGENT),
        config={"script": script},
    )  # fmt: skip


def batch_wait(batch, *, timeout: float = 3600) -> list:
    """Wait for every run of the batch to end; its runs."""
    from runner.models import Run

    deadline = time.monotonic() + timeout
    while Run.objects.live().filter(batch=batch).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"batch {batch.pk} did not end within {timeout:.0f} s")
        time.sleep(0.5)
    return list(Run.objects.filter(batch=batch).order_by("pk"))


def workers_start(env: dict[str, str], count: int, logs: Path, tag: str) -> list[subprocess.Popen]:
    """``count`` Procfile workers."""
    logs.mkdir(exist_ok=True)
    workers = []
    try:
        for i in range(count):
            node = f"{tag}-{i + 1}"
            workers.append(worker_start(env, node=node, log_path=logs / f"{node}.log"))
    except BaseException:
        for proc in workers:
            process_stop(proc)
        raise
    return workers


def run_phases(runs: list) -> dict[str, float]:
    """Where a run's time went, the median over ``runs`` in seconds: from its claim to its first step (the task's
    workspace laid out, the agent started in its sandbox), in the steps (each action, snapshot and commit; the
    Execute Script steps include the work), and from its last step to its end (evaluation in the sandbox,
    the end recorded)."""
    from django.db.models import Min, Sum

    from runner.models import Step

    rows = {
        row["run"]: row
        for row in Step.objects.filter(run__in=runs)
        .values("run")
        .annotate(first=Min("started_at"), steps=Sum("duration_s"))
    }
    phases: dict[str, list[float]] = {"to the first step": [], "steps": [], "after the last step": []}
    for run in runs:
        row = rows[run.pk]
        last = Step.objects.filter(run=run).order_by("-index").first()
        phases["to the first step"].append((row["first"] - run.started_at).total_seconds())
        phases["steps"].append(row["steps"])
        phases["after the last step"].append((run.finished_at - last.started_at).total_seconds() - last.duration_s)
    return {name: statistics.median(values) for name, values in phases.items()}


def platform_batch(*, env, workers: int, runs: int, agent, task, logs: Path, tag: str) -> tuple[float, str, list]:
    """Wall time of a batch of ``runs`` runs on ``workers`` fresh workers (each warmed up by one run); a
    note when a run did not finish on its first attempt; the runs."""
    from runner.models import RunSpec
    from runner.services import batch_create

    procs = workers_start(env, workers, logs, tag)
    try:
        warm, _ = batch_create(spec=RunSpec(agent), tasks=[task], repeats=workers)
        batch_wait(warm)
        started = time.time()
        batch, _ = batch_create(spec=RunSpec(agent), tasks=[task], repeats=runs)
        ended = batch_wait(batch)
    finally:
        for proc in procs:
            process_stop(proc)
    bad = [f"run {r.pk} {r.status} attempt {r.attempt}" for r in ended if r.status != "finished" or r.attempt != 1]
    wall = max(r.finished_at.timestamp() for r in ended) - started
    return wall, "; ".join(bad), ended


def bare_batch(*, work: Path, executions: int, lanes: int) -> float:
    """Wall time of ``executions`` runs of ``work`` as plain subprocesses, split over ``lanes`` lanes at once."""
    shares = [executions // lanes + (i < executions % lanes) for i in range(lanes)]

    def lane(count: int) -> None:
        for _ in range(count):
            subprocess.run([sys.executable, str(work)], cwd=work.parent, check=True, capture_output=True)

    threads = [threading.Thread(target=lane, args=(n,)) for n in shares]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def cpu_seconds_of(work: Path) -> float:
    """CPU seconds (user and system) one run of ``work`` takes as a subprocess: unlike its wall time, not
    stretched by other work on the machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, str(work)], cwd=work.parent, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def calibrated_iterations(folder: Path, seconds: float) -> int:
    """Loop iterations of WORK that take about ``seconds`` of CPU here (interpreter start included)."""
    probe = folder / "probe.py"
    n = 1_000_000
    probe.write_text(WORK.format(n=n))
    took = min(cpu_seconds_of(probe) for _ in range(3))
    return max(int(n * seconds / took), 1000)


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def measure(args: argparse.Namespace, var: Path, env: dict[str, str]) -> None:
    print(f"load average at the start {load()} (1/5/15 min), {os.cpu_count()} cores; var {var}")
    iterations = calibrated_iterations(var, args.work_s)
    work = var / "work.py"
    work.write_text(WORK.format(n=iterations))
    task = task_ready(var).task
    agent = scripted_agent("scale-out", run_script(work.read_text(), executions=args.executions))
    executions = args.runs * args.executions
    print(f"{args.runs} runs x {args.executions} execution(s) of work.py ({iterations:,} iterations, "
          f"{cpu_seconds_of(work):.2f} s of CPU); {args.rounds} rounds")  # fmt: skip

    times: dict[str, list[float]] = {"1 worker": [], "2 workers": [], "bare, 1 lane": [], "bare, 2 lanes": []}
    batches: dict[int, list] = {1: [], 2: []}
    for r in range(args.rounds):
        order = [1, 2] if r % 2 == 0 else [2, 1]
        for n in order:
            before = load()
            wall, bad, ended = platform_batch(
                env=env, workers=n, runs=args.runs, agent=agent, task=task, logs=var / "logs", tag=f"r{r}w{n}"
            )
            times[f"{n} worker{'s' * (n > 1)}"].append(wall)
            batches[n] += ended
            print(f"  round {r + 1}: {n} worker(s)   {wall:7.2f} s   load {before} -> {load()}  {bad}")
        for n in order:
            before = load()
            wall = bare_batch(work=work, executions=executions, lanes=n)
            times[f"bare, {n} lane{'s' * (n > 1)}"].append(wall)
            print(f"  round {r + 1}: bare, {n} lane(s) {wall:7.2f} s   load {before} -> {load()}")

    med = {k: statistics.median(v) for k, v in times.items()}
    platform = med["1 worker"] / med["2 workers"]
    bare = med["bare, 1 lane"] / med["bare, 2 lanes"]
    print("medians:", ", ".join(f"{k} {v:.2f} s" for k, v in med.items()))
    columns = (times["1 worker"], times["2 workers"], times["bare, 1 lane"], times["bare, 2 lanes"])
    per_round = ", ".join(f"{(a / b) / (c / d):.3f}" for a, b, c, d in zip(*columns, strict=True))
    print(f"speed-up with two: platform {platform:.2f}x, bare scripts {bare:.2f}x; "
          f"ratio {platform / bare:.3f} (goal >= 0.95); per round {per_round}")  # fmt: skip
    print(f"platform overhead a run (1 worker, over its bare work): "
          f"{(med['1 worker'] - med['bare, 1 lane']) / args.runs:.2f} s")  # fmt: skip
    for n, ended in batches.items():
        phases = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in run_phases(ended).items())
        print(f"a run on {n} worker(s), medians: {phases}")
    print(f"load average at the end {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work-s", type=float, default=1.0, help="seconds of CPU one execution of work.py takes")
    parser.add_argument("--executions", type=int, default=1, help="Execute Script steps per run")
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/15")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # each figure as it is measured, also into a pipe

    with postgres_scratch(args.server, "bench_scaleout") as database_url:
        var, env = platform_setup(database_url=database_url, broker=args.broker, prefix="scaleout")
        try:
            measure(args, var, env)
        finally:
            from django.db import connections

            connections.close_all()
            shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    main()
