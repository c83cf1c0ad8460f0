"""A run as an MLAgentBench log and back: ``export_log`` and ``import_log`` against the run's length.

A task with 20 MB of read-only data and a small script; a finished run of 10 and of 50 steps whose every step
rewrites the script (2 kB) and a result file, as an agent editing and running a script does. For each: the time to
write the log zip and its size, the time to import it again (the task is prepared already; the final workspace is
scored in the sandbox, which is timed on its own too), and the bytes the import added to the blob store (a log
whose files are stored already adds only its manifests). The database is a throwaway SQLite under a temporary
folder; ``--database-url`` measures another (give it a scratch database, never a live one).

    .venv/bin/python benchmarks/trace_roundtrip.py [--repeats 3] [--data-mb 20] [--database-url ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from pathlib import Path

from scratch import django_scratch

PACKAGE = {
    "task.toml": 'title = "Round trip"\ncategory = "canonical"\n[metric]\nname = "value"\nhigher_is_better = true\n',
    "scripts/research_problem.txt": "Make value.txt hold a larger number.",
    "scripts/read_only_files.txt": "data.bin\n",
    "scripts/eval.py": (
        "import os\n\ndef get_score(submission_folder='../env'):\n"
        "    with open(os.path.join(submission_folder, 'value.txt')) as fh:\n        return float(fh.read())\n"
    ),
    "env/train.py": "with open('value.txt', 'w') as fh:\n    fh.write('2.0')\n",
}


def blob_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-mb", type=int, default=20)
    parser.add_argument("--database-url", default="", help="a scratch database to measure (default: throwaway SQLite)")
    args = parser.parse_args()
    var = django_scratch("roundtripbench-", args.database_url)
    from django.conf import settings
    from django.core.management import call_command
    from django.utils import timezone

    from runner.execution.evaluation import evaluate
    from runner.execution.preparation import task_version_prepare
    from runner.execution.sandboxes import get_sandbox
    from runner.logs.exports import log_export
    from runner.logs.imports import log_import
    from runner.models import Agent, Run, Step
    from runner.workspace.snapshots import BlobStore
    from task_bank.services import task_import

    call_command("migrate", verbosity=0)
    package = var / "package"
    for rel, text in PACKAGE.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(text)
    (package / "env" / "data.bin").write_bytes(os.urandom(args.data_mb * 1024 * 1024))
    version, _ = task_import(root=package, slug=f"roundtrip-{os.getpid()}")
    prepared = task_version_prepare(version)
    store = BlobStore()
    agent = Agent.objects.create(name="bench-agent", kind=Agent.Kind.EXTERNAL, entrypoint="")

    def run_of(steps: int) -> Run:
        run = Run.objects.create(
            task=version.task,
            task_version=version,
            agent=agent,
            status=Run.Status.FINISHED,
            initial_snapshot=prepared.env_manifest_sha,
            steps_count=steps,
            wall_seconds=steps * 10.0,
        )
        started, rows, sha = timezone.now(), [], prepared.env_manifest_sha
        for i in range(steps):
            manifest = dict(prepared.env_manifest)
            script = f"# step {i}\n" + "x = 1\n" * 340 + f"with open('value.txt', 'w') as fh:\n    fh.write('{i}')\n"
            manifest["train.py"] = [store.put_bytes(script.encode()), len(script)]
            manifest["value.txt"] = [store.put_bytes(str(i).encode()), len(str(i))]
            sha = store.manifest_save(manifest)
            rows.append(
                Step(
                    run=run,
                    index=i,
                    action="Execute Script",
                    action_input={"script_name": "train.py"},
                    observation="epoch 1: loss 0.1\n" * 20,
                    started_at=started + timezone.timedelta(seconds=10 * i),
                    duration_s=9.0,
                    snapshot=sha,
                    low_level=[{"action": "Read File", "input": {"file_name": "train.py"}, "observation": "..."}],
                )
            )
        Step.objects.bulk_create(rows)
        Run.objects.filter(pk=run.pk).update(final_snapshot=sha)
        return Run.objects.get(pk=run.pk)

    sandbox = get_sandbox()
    scoring = []
    for _ in range(args.repeats):
        began = time.perf_counter()
        evaluate(prepared, prepared.env_manifest, sandbox=sandbox)
        scoring.append(time.perf_counter() - began)
    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(
        f"MLAgentBench log round trip ({engine}, sandbox {settings.BENCH_SANDBOX}, {args.data_mb} MB read-only data, "
        f"median of {args.repeats}); scoring one workspace alone: {statistics.median(scoring) * 1000:.0f} ms"
    )
    print(f"{'steps':>6} {'export':>10} {'zip size':>12} {'import':>10} {'blobs added':>12}")
    for steps in (10, 50):
        run = run_of(steps)
        exports, imports, added = [], [], []
        out = var / f"run-{steps}.zip"
        for _ in range(args.repeats):
            began = time.perf_counter()
            log_export(run=run, out=out)
            exports.append(time.perf_counter() - began)
            before = blob_bytes(Path(settings.BENCH_BLOB_DIR))
            began = time.perf_counter()
            log_import(source=out)
            imports.append(time.perf_counter() - began)
            added.append(blob_bytes(Path(settings.BENCH_BLOB_DIR)) - before)
        print(
            f"{steps:>6} {statistics.median(exports) * 1000:>7.0f} ms {out.stat().st_size:>12,} "
            f"{statistics.median(imports) * 1000:>7.0f} ms {max(added):>12,}"
        )


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(os.environ.get("BENCH_VAR_DIR", "/nonexistent"), ignore_errors=True)
