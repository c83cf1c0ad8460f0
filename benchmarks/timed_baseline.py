"""Does noise decide success on timed tasks? The unchanged baseline agent, run N times on a timed task, must succeed
0 times: its final workspace is the starting one, so any "improvement" is noise.

Each run is scored as the platform scores timed tasks (paired with a baseline measured alongside it, the starter
script run afresh). For contrast, the same final scores are also compared with the version's validated baseline,
as an unpaired scorer would; that is the figure noise moves.

    .venv/bin/python benchmarks/timed_baseline.py [--task vectorize-conv] [--runs 10] [--load 1]
    .venv/bin/python benchmarks/timed_baseline.py --task-dir PATH/TO/MLAgentBench/benchmarks/vectorization \\
        --lower-is-better   # an MLAgentBench folder, imported unchanged (BENCH_SANDBOX_PYTHON: a NumPy<2 venv)

``--load K`` keeps K busy processes running beside the runs, to measure on a loaded machine. Everything runs in
a throwaway SQLite database and folder.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def burn(stop_at: float) -> None:
    while time.time() < stop_at:
        sum(i * i for i in range(10_000))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="vectorize-conv", help="a built-in timed task")
    parser.add_argument("--task-dir", default="", help="an MLAgentBench task folder to import unchanged instead")
    parser.add_argument("--lower-is-better", action="store_true", help="with --task-dir: the metric's direction")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--load", type=int, default=1, help="busy processes beside the runs")
    args = parser.parse_args()
    var = Path(tempfile.mkdtemp(prefix="timedbench-"))
    os.environ["BENCH_VAR_DIR"] = str(var)
    for name in ("DATABASE_URL", "BENCH_RUNS_DIR", "BENCH_TASK_CACHE_DIR", "BENCH_BLOB_DIR", "MEDIA_ROOT"):
        os.environ.pop(name, None)  # never the deployment's database or folders
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from runner.agents.builtin import agents_builtin_ensure
    from runner.execution import run_execute
    from runner.services import run_create
    from task_bank.models import TaskVersion
    from task_bank.services import BUILTIN_DIR, task_import

    call_command("migrate", verbosity=0)
    if args.task_dir:
        version, _ = task_import(
            root=Path(args.task_dir), slug="timed-bench", higher_is_better=not args.lower_is_better
        )
        TaskVersion.objects.filter(pk=version.pk).update(timed=True)
    else:
        version, _ = task_import(root=BUILTIN_DIR / args.task, slug=args.task)
    version.refresh_from_db()
    if not version.timed:
        sys.exit(f"{version} is not a timed task")
    load = [multiprocessing.Process(target=burn, args=(time.time() + 24 * 3600,)) for _ in range(args.load)]
    for proc in load:
        proc.start()
    try:
        call_command("validate_task", version.task.slug)
        version.refresh_from_db()
        print(f"validated: {version.validation_log}")
        baseline = next(a for a in agents_builtin_ensure() if a.name == "baseline")
        paired_successes = unpaired_successes = 0
        print(f"{'run':>4} {'score':>10} {'paired baseline':>16} {'paired':>8} {'vs validated':>13}")
        for i in range(args.runs):
            run = run_execute(run_create(task=version.task, agent=baseline, enqueue=False).pk)
            unpaired = version.improvement_of(run.final_score)
            paired_successes += bool(run.succeeded)
            unpaired_successes += bool(version.succeeded_with(run.final_score))
            print(
                f"{i + 1:>4} {run.final_score or float('nan'):>10.4f} {run.paired_baseline or float('nan'):>16.4f} "
                f"{run.improvement or 0:>+8.1%} {unpaired or 0:>+13.1%}"
            )
    finally:
        for proc in load:
            proc.terminate()
    print(f"\nsuccesses of the unchanged baseline agent, {args.runs} runs, {args.load} busy processes beside them:")
    print(f"  scored paired (the platform):            {paired_successes} of {args.runs}")
    print(f"  against the validated baseline (unpaired): {unpaired_successes} of {args.runs}")


if __name__ == "__main__":
    main()
