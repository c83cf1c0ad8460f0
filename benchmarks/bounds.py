"""What a submitter can make the platform hold, with the bounds on and off: the attacks the bounds are there for,
replayed on a throwaway var folder and SQLite database (``--database-url`` for a scratch PostgreSQL one).

- storage: a run whose script writes a fresh random file of ``--file-mb`` MB each step for ``--steps`` steps, with
  no storage limit and with ``BENCH_RUN_MAX_STORED_MB=--limit-mb``, alternately: what it stored, its steps, how it
  ended; then the collector's pass after the runs are deleted (what it freed, how long it took);
- workspaces: the same ``--fill-mb`` written into an ext4 and a tmpfs workspace, alternately: the host memory it
  took (``Shmem`` in /proc/meminfo), the image's disk blocks, and the time to lay out and remove each workspace;
- uploads: a log zip of about 1 MB that unpacks to a gigabyte, and one of ``--members`` files: how long until it is
  refused, and the blobs it added;
- smoke tests: how long an upload of an agent that never answers holds its request.

Needs a root worker's machine (mounts) and bubblewrap. Prints one table per part.

    .venv/bin/python benchmarks/bounds.py [--steps 9] [--file-mb 64] [--limit-mb 256] [--rounds 2]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import time
import zipfile
from pathlib import Path

from scratch import django_scratch

AGENT = """
from mlab_agents.sdk import Env, main

def run(env: Env) -> None:
    steps = env.start.config["steps"]
    for n in range(steps):
        env.act("Execute Script", {"script_name": f"fill_{n}.py"}, Thought="write a fresh file")
    env.act("Final Answer", {"final_answer": "done"})

if __name__ == "__main__":
    main(run)
"""

PACKAGE = {
    "task.toml": 'title = "Bounds"\ncategory = "canonical"\n[metric]\nname = "value"\nhigher_is_better = true\n'
    "[limits]\nmax_steps = 100\nmax_time_s = 3600\n",
    "scripts/research_problem.txt": "Make value.txt hold a larger number.",
    "scripts/eval.py": (
        "import os\n\ndef get_score(submission_folder='../env'):\n"
        "    with open(os.path.join(submission_folder, 'value.txt')) as fh:\n        return float(fh.read())\n"
    ),
    "env/train.py": "with open('value.txt', 'w') as fh:\n    fh.write('2.0')\n",
}


def meminfo_kb(name: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    return 0


def storage(args, version, agent_dir: Path) -> None:
    from django.conf import settings

    from runner.execution import run_execute
    from runner.execution.collector import blobs_collect
    from runner.models import Agent, Run
    from runner.services import run_create

    agent = Agent.objects.create(
        name="filler", kind=Agent.Kind.PACKAGE, entrypoint="filler", package_path=str(agent_dir),
        config={"steps": args.steps},
    )  # fmt: skip
    rows = {"no limit": [], f"limit {args.limit_mb} MB": []}
    for _ in range(args.rounds):
        for label, limit in (("no limit", 0), (f"limit {args.limit_mb} MB", args.limit_mb)):
            settings.BENCH_RUN_MAX_STORED_MB = limit
            start = time.perf_counter()
            run = run_execute(run_create(task=version.task, agent=agent, enqueue=False).pk)
            rows[label].append((time.perf_counter() - start, run))
    print(f"\nstorage: {args.steps} steps, each writing a fresh {args.file_mb} MB file ({args.rounds} rounds)")
    print(f"{'':<18}{'stored (MB)':>12}{'steps':>7}{'wall (s)':>10}  ending")
    for label, results in rows.items():
        run = results[-1][1]
        stored = statistics.median(r.stored_bytes for _, r in results) / (1 << 20)
        wall = statistics.median(w for w, _ in results)
        ending = f"{run.status}/{run.failure_kind or '-'} {run.error[:70]}"
        print(f"{label:<18}{stored:>12.1f}{run.steps_count:>7}{wall:>10.1f}  {ending}")
    Run.objects.filter(agent=agent).delete()
    start = time.perf_counter()
    done = blobs_collect(grace_s=0)
    print(
        f"collector after the runs were deleted: {done.removed} blobs removed, "
        f"{done.freed_bytes / (1 << 20):.1f} MB freed, {done.kept} kept, in {time.perf_counter() - start:.2f} s"
    )


def workspaces(args, tmp: Path) -> None:
    from runner.execution.sandboxes import get_sandbox
    from runner.workspace.mounts import image_path, remove_tree, workspace_layout
    from runner.workspace.snapshots import BlobStore

    box = get_sandbox("bwrap")
    results: dict[str, list[tuple[float, float, float, float]]] = {"ext4": [], "tmpfs": []}
    for n in range(args.rounds * 5):
        for kind in ("ext4", "tmpfs"):
            workspace = tmp / f"ws-{kind}-{n}" / "workspace-1"
            start = time.perf_counter()
            workspace_layout(
                {}, workspace, BlobStore(), read_only=set(), sandbox=box, filesystem=kind,
                limit_mb=args.fill_mb * 2, max_files=100_000,
            )  # fmt: skip
            laid = time.perf_counter() - start
            shmem = meminfo_kb("Shmem")
            if n % 5 == 0:
                with open(workspace / "fill.bin", "wb") as fh:
                    for _ in range(args.fill_mb):
                        fh.write(os.urandom(1 << 20))
                os.sync()
            held_mb = (meminfo_kb("Shmem") - shmem) / 1024
            disk_mb = image_path(workspace).stat().st_blocks * 512 / (1 << 20) if kind == "ext4" else 0.0
            start = time.perf_counter()
            remove_tree(workspace)
            removed = time.perf_counter() - start
            if n % 5 == 0:
                results[kind].append((laid, removed, held_mb, disk_mb))
            else:
                results[kind].append((laid, removed, float("nan"), float("nan")))
    print(f"\nworkspaces: {args.fill_mb} MB written into each ({args.rounds * 5} lay-outs of each, alternately)")
    print(f"{'':<8}{'lay out (ms)':>14}{'remove (ms)':>13}{'memory held (MB)':>18}{'disk (MB)':>11}")
    for kind, rows in results.items():
        filled = [r for r in rows if r[2] == r[2]]
        print(
            f"{kind:<8}{statistics.median(r[0] for r in rows) * 1000:>14.1f}"
            f"{statistics.median(r[1] for r in rows) * 1000:>13.1f}"
            f"{statistics.median(r[2] for r in filled):>18.1f}{statistics.median(r[3] for r in filled):>11.1f}"
        )


def log_zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("run/env_log/trace.json", '{"steps": [], "low_level_steps": [], "action_infos": {}}')
        archive.writestr("run/env_log/overall_time.txt", "1")
        for name, data in members.items():
            archive.writestr(f"run/env_log/traces/step_final_files/{name}", data)
    return buffer.getvalue()


def uploads(args, version, store_root: Path) -> None:
    from runner.logs.imports import LogImportError, log_import

    def blob_bytes() -> int:
        return sum(p.stat().st_blocks * 512 for p in store_root.rglob("*") if p.is_file())

    bomb = log_zip({"zeros.bin": b"\0" * (1 << 30)})
    many = log_zip({f"f{n}.txt": b"x" for n in range(args.members)})
    print("\nuploads: how long until refused, and the blobs added")
    for label, data in ((f"{len(bomb) / (1 << 20):.1f} MB zip of 1 GB", bomb), (f"{args.members} files", many)):
        path = store_root.parent / "upload.zip"
        path.write_bytes(data)
        before = blob_bytes()
        start = time.perf_counter()
        try:
            log_import(source=path, task_slug=version.task.slug)
            said = "accepted"
        except LogImportError as exc:
            said = f"refused: {str(exc)[:90]}"
        print(f"  {label:<24}{time.perf_counter() - start:>8.2f} s  +{(blob_bytes() - before) / 1024:.0f} kB  {said}")


def smoke(args, tmp: Path) -> None:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile

    from runner.agents.packages import agent_upload

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("silent/agent.toml", 'name = "silent"\nversion = "1"\nentrypoint = "silent"\n')
        archive.writestr("silent/silent.py", "import time\ntime.sleep(3600)\n")
    user = get_user_model().objects.create_user("bench-submitter")
    start = time.perf_counter()
    agent, _ = agent_upload(
        upload=SimpleUploadedFile("silent.zip", buffer.getvalue()), submitter=user, visibility="public"
    )
    took = time.perf_counter() - start
    print(f"\nsmoke test: an upload of an agent that never answers answered in {took * 1000:.0f} ms; its test is")
    timeout = settings.BENCH_AGENT_SMOKE_TIMEOUT_S
    print(f"  {agent.smoke_state}, a worker's job (BENCH_AGENT_SMOKE_TIMEOUT_S {timeout:g} s)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=9)
    parser.add_argument("--file-mb", type=int, default=64)
    parser.add_argument("--limit-mb", type=int, default=256)
    parser.add_argument("--fill-mb", type=int, default=256)
    parser.add_argument("--members", type=int, default=99_990)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--database-url", default="", help="a scratch database (default: throwaway SQLite)")
    args = parser.parse_args()
    var = django_scratch("boundsbench-", args.database_url)
    from django.conf import settings
    from django.core.management import call_command

    from task_bank.services import task_import

    call_command("migrate", verbosity=0)
    package = var / "package"
    fill = (
        "import os\nwith open('out_{n}.bin', 'wb') as fh:\n"
        "    for _ in range({mb}):\n        fh.write(os.urandom(1 << 20))\n"
        "open('value.txt', 'w').write('3.0')\n"
    )
    files = {**PACKAGE, **{f"env/fill_{n}.py": fill.format(n=n, mb=args.file_mb) for n in range(args.steps)}}
    for rel, text in files.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(text)
    version, _ = task_import(root=package, slug="bounds")
    version.status, version.baseline_score = version.Status.READY, 2.0
    version.save(update_fields=["status", "baseline_score"])
    agent_dir = var / "filler"
    agent_dir.mkdir()
    (agent_dir / "filler.py").write_text(AGENT)
    for path in (agent_dir, agent_dir / "filler.py"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    print(
        f"workspace filesystem {settings.BENCH_WORKSPACE_FS}, sandbox {settings.BENCH_SANDBOX}, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    storage(args, version, agent_dir)
    workspaces(args, var)
    uploads(args, version, Path(settings.BENCH_BLOB_DIR))
    smoke(args, var)


if __name__ == "__main__":
    main()
