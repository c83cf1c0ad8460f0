"""The docker sandbox on this machine's engine against bwrap.

1. A process start to end: ``python -c pass`` started with ``Sandbox.popen``, read to its end and reaped, in a new
   container (docker) and a new bwrap sandbox, alternately; what removing the container costs is measured apart
   (it happens off the critical path, in the backend's remover thread).
2. Execute Script of ``print('hello')`` through the environment on each backend, alternately (docker starts a
   container per script; bwrap keeps one sandbox for the run).
3. The sandbox image's size, as the engine reports it.

Needs a running engine with the sandbox image (docker/build-images.sh) and a root worker's view (bwrap as root).

    .venv/bin/python benchmarks/docker_sandbox.py [--repeats 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p90 = ms[max(int(len(ms) * 0.9) - 1, 0)]
    return f"{name:<52} median {statistics.median(ms):7.1f} ms   mean {statistics.mean(ms):7.1f} ms   p90 {p90:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    var = Path(tempfile.mkdtemp(prefix="dockerbench-"))
    os.environ["BENCH_VAR_DIR"] = str(var)
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from django.conf import settings

    from runner.actions import Environment
    from runner.execution.sandboxes import get_sandbox
    from runner.sandbox.docker import REMOVER
    from runner.sandbox.identity import writable_for_sandbox
    from runner.sandbox.process import reap, run_process

    boxes = {kind: get_sandbox(kind) for kind in ("docker", "bwrap")}
    docker = boxes["docker"]

    starts: dict[str, list[float]] = {kind: [] for kind in boxes}
    removals: list[float] = []
    for _ in range(args.repeats):
        for kind, box in boxes.items():
            started = time.perf_counter()
            proc = box.popen([box.python, "-c", "pass"], mounts=[], cwd="/tmp")
            result = run_process(proc, timeout=120)
            reap(proc)
            starts[kind].append(time.perf_counter() - started)
            assert result.exit_code == 0, result.stderr
            if kind == "docker":
                started = time.perf_counter()
                REMOVER.drain()
                removals.append(time.perf_counter() - started)
    print(f"A process start to end (python -c pass), {args.repeats} times each, alternately:")
    for kind, seconds in starts.items():
        print(summary(f"new {kind} sandbox", seconds))
    print(summary("docker: the container's removal (off the critical path)", removals))

    envs = {}
    for kind, box in boxes.items():
        workspace = var / f"ws-{kind}"
        workspace.mkdir()
        (workspace / "hello.py").write_text("print('hello')\n")
        writable_for_sandbox(workspace, box.ids)
        envs[kind] = Environment(workspace=workspace, sandbox=box, python=box.python)
    scripts: dict[str, list[float]] = {kind: [] for kind in envs}
    for _ in range(args.repeats):
        for kind, env in envs.items():
            started = time.perf_counter()
            outcome = env.execute("Execute Script", {"script_name": "hello.py"})
            scripts[kind].append(time.perf_counter() - started)
            assert "hello" in outcome.observation, outcome.observation
    for env in envs.values():
        env.close()
    REMOVER.drain()
    print(f"\nExecute Script of print('hello'), {args.repeats} times each, alternately:")
    for kind, seconds in scripts.items():
        kept = " (kept for the run)" if getattr(envs[kind].sandbox, "persistent", False) else " (a container each)"
        print(summary(f"{kind}{kept}", seconds))

    image = docker.client.images.get(settings.BENCH_DOCKER_IMAGE)
    print(f"\nimage {settings.BENCH_DOCKER_IMAGE}: {image.attrs['Size'] / 1e9:.2f} GB")
    info = docker.client.info()
    print(f"engine {info['ServerVersion']}, storage driver {info['Driver']}, cgroup v{info.get('CgroupVersion', '?')}")


if __name__ == "__main__":
    main()
