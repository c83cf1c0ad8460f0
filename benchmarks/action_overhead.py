"""Per-action overhead of the environment.

1. Execute Script of a trivial script through the environment in the configured sandbox (bwrap by default),
   against a bare ``subprocess.run`` of the same script with the same interpreter. ``--compare`` (bwrap) runs
   rounds of a new sandbox per script and of the run's kept sandbox (its supervisor) alternately, each beside a
   bare run, for ``print('hello')`` and for a script that sleeps one second. ``--first`` (bwrap) measures a run's
   first script: each round a bare run and, after an agent's start, the first script of two new environments: one
   whose kept sandbox starts on that script, one whose sandbox was launched as the session launches it, once the
   agent's process is started (``RunSession.agent_started``). ``--finder`` (bwrap): Execute Script in the
   run's kept sandbox with the platform's editable-install .pth files hidden (as runs have them) and shown,
   alternately.
2. A file action round trip as a run makes it: Write File, the workspace snapshot, and the step's database
   write, in a throwaway SQLite database under a temporary folder; ``--database-url`` measures another
   database instead (it is migrated and gets a task and a run: give it a scratch database, never a live one).

    .venv/bin/python benchmarks/action_overhead.py [--repeats 30] [--compare | --first | --finder]
        [--database-url postgres://.../scratch]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p90 = ms[int(len(ms) * 0.9) - 1]
    return f"{name:<48} median {statistics.median(ms):7.1f} ms   mean {statistics.mean(ms):7.1f} ms   p90 {p90:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--compare", action="store_true", help="new sandbox per script vs the kept one (bwrap)")
    parser.add_argument("--first", action="store_true", help="a run's first script, each round a new sandbox (bwrap)")
    parser.add_argument("--finder", action="store_true", help="editable-install finder hidden vs shown (bwrap)")
    parser.add_argument("--database-url", default="", help="a scratch database to measure (default: throwaway SQLite)")
    args = parser.parse_args()
    var = Path(tempfile.mkdtemp(prefix="actionbench-"))
    os.environ["BENCH_VAR_DIR"] = str(var)  # blobs, workspaces and the default SQLite database: all throwaway
    for name in ("DATABASE_URL", "BENCH_RUNS_DIR", "BENCH_TASK_CACHE_DIR", "BENCH_BLOB_DIR", "MEDIA_ROOT"):
        os.environ.pop(name, None)  # never the deployment's database or folders by accident
    if args.database_url:
        os.environ["DATABASE_URL"] = args.database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from runner.actions import Environment
    from runner.execution.sandboxes import get_sandbox, sandbox_python

    python = sandbox_python()
    workspace = var / "ws"
    workspace.mkdir()
    (workspace / "hello.py").write_text("print('hello')\n")
    env = Environment(workspace=workspace, sandbox=get_sandbox(), python=python)

    if args.compare:
        compare(args.repeats, workspace, python)
        return
    if args.first:
        first_script(args.repeats, workspace, python)
        return
    if args.finder:
        finder(args.repeats, workspace, python)
        return
    bare, sandboxed = [], []
    for _ in range(args.repeats):
        started = time.perf_counter()
        subprocess.run([python, "-u", "hello.py"], cwd=workspace, capture_output=True, check=True)
        bare.append(time.perf_counter() - started)
        started = time.perf_counter()
        outcome = env.execute("Execute Script", {"script_name": "hello.py"})
        sandboxed.append(time.perf_counter() - started)
        assert "hello" in outcome.observation, outcome.observation
    env.close()
    kept = " (kept for the run)" if getattr(env.sandbox, "persistent", False) else ""
    print(f"Execute Script of print('hello'), {args.repeats} times, sandbox {settings.BENCH_SANDBOX}{kept}:")
    print(summary("bare subprocess.run", bare))
    print(summary(f"Environment.execute in {settings.BENCH_SANDBOX}", sandboxed))
    print(f"{'overhead (median)':<48} {statistics.median(sandboxed) * 1000 - statistics.median(bare) * 1000:7.1f} ms")

    # A file action as a run records it: environment + snapshot + step row + run counters, in one transaction.
    call_command("migrate", verbosity=0)
    from runner.agents.builtin import agents_builtin_ensure
    from runner.execution import RunSession, run_claim
    from runner.execution.preparation import task_version_prepare
    from runner.models import Run, RunLimits
    from runner.services import run_create
    from runner.workspace.mounts import remove_tree
    from task_bank.services import BUILTIN_DIR, task_import

    version, _ = task_import(root=BUILTIN_DIR / "digits", slug="bench-digits")
    agent = next(a for a in agents_builtin_ensure() if a.name == "baseline")
    run = run_create(
        task=version.task,
        agent=agent,
        enqueue=False,
        limits=RunLimits(max_steps=10_000),
        purpose=Run.Purpose.VALIDATION,
    )
    session = RunSession(run_claim(run.pk))
    session.sandbox = get_sandbox()
    session.layout(task_version_prepare(version, sandbox=session.sandbox))
    round_trips = []
    for i in range(args.repeats):
        started = time.perf_counter()
        session.act({"action": "Write File", "input": {"file_name": "notes.txt", "content": f"note {i}\n" * 50}})
        round_trips.append(time.perf_counter() - started)
    if session.environment is not None:
        session.environment.close()
    remove_tree(session.workspace)  # a sized workspace is a mount: it goes with the benchmark
    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(f"\nWrite File recorded as a step (snapshot + {engine} write), {args.repeats} times:")
    print(summary("action + snapshot + database commit", round_trips))


def compare(repeats: int, workspace: Path, python: str) -> None:
    """Rounds of: bare run, Execute Script in a new sandbox, bare run, Execute Script in the kept sandbox."""
    from runner.actions import Environment
    from runner.execution.sandboxes import get_sandbox

    (workspace / "sleep1.py").write_text("import time\ntime.sleep(1)\nprint('hello')\n")
    envs = {}
    for name, persistent in (("new", False), ("kept", True)):
        sandbox = get_sandbox("bwrap")
        sandbox.persistent = persistent
        envs[name] = Environment(workspace=workspace, sandbox=sandbox, python=python)
    for script, rounds in (("hello.py", repeats), ("sleep1.py", max(5, repeats // 3))):
        times = {name: ([], []) for name in envs}
        for env in envs.values():  # warm: the kept sandbox starts on its first script
            env.execute("Execute Script", {"script_name": script})
        for _ in range(rounds):
            for name, env in envs.items():
                started = time.perf_counter()
                subprocess.run([python, "-u", script], cwd=workspace, capture_output=True, check=True)
                times[name][0].append(time.perf_counter() - started)
                started = time.perf_counter()
                outcome = env.execute("Execute Script", {"script_name": script})
                times[name][1].append(time.perf_counter() - started)
                assert "hello" in outcome.observation, outcome.observation
        print(f"Execute Script of {script}, {rounds} interleaved rounds, bwrap:")
        for name, (bare, sandboxed) in times.items():
            print(summary(f"  bare subprocess.run (rounds of {name})", bare))
            print(
                summary(
                    "  " + {"new": "a new sandbox per script", "kept": "the sandbox kept for the run"}[name], sandboxed
                )
            )
            overhead = statistics.median(sandboxed) * 1000 - statistics.median(bare) * 1000
            paired = statistics.median(s - b for s, b in zip(sandboxed, bare, strict=True)) * 1000
            print(f"{'  overhead (median)':<48} {overhead:7.1f} ms   paired (median of each round's) {paired:7.1f} ms")
    for env in envs.values():
        env.close()


def finder(repeats: int, workspace: Path, python: str) -> None:
    """Rounds of Execute Script of hello.py in two kept bwrap sandboxes: the editable-install .pth files hidden
    (``BwrapSandbox.editable_pths``, as runs have it) and shown (as before they were hidden)."""
    from runner.actions import Environment
    from runner.execution.sandboxes import get_sandbox

    envs = {}
    for name in ("hidden", "shown"):
        sandbox = get_sandbox("bwrap")
        sandbox.persistent = True
        if name == "shown":
            sandbox.editable_pths = []
        envs[name] = Environment(workspace=workspace, sandbox=sandbox, python=python)
        envs[name].execute("Execute Script", {"script_name": "hello.py"})  # the kept sandbox starts
    times = {name: [] for name in envs}
    for _ in range(repeats):
        for name, env in envs.items():
            started = time.perf_counter()
            outcome = env.execute("Execute Script", {"script_name": "hello.py"})
            times[name].append(time.perf_counter() - started)
            assert "hello" in outcome.observation, outcome.observation
    print(f"Execute Script of hello.py in the kept bwrap sandbox, {repeats} interleaved rounds:")
    print(summary("  editable-install .pth files hidden", times["hidden"]))
    print(summary("  editable-install .pth files shown", times["shown"]))
    ratio = statistics.median(times["shown"]) / statistics.median(times["hidden"])
    print(f"{'  shown / hidden (medians)':<48} {ratio:7.2f}x")
    for env in envs.values():
        env.close()


def first_script(repeats: int, workspace: Path, python: str) -> None:
    """Rounds of a bare run and of a run's start as the session makes it, two ways: an agent starts, then the first
    Execute Script of a new environment, whose kept sandbox starts on that script (as before the session launched
    it) or was launched once the agent's process was started (``RunSession.agent_started``). Each round has new
    environments (new sandboxes); the order of the three turns with every round. The agent imports the SDK and
    exits: the shortest time any agent takes to its first action."""
    from runner.actions import Environment
    from runner.execution.agent_process import agent_popen
    from runner.execution.sandboxes import get_sandbox
    from runner.sandbox.process import run_process

    agent_starts: dict[bool, list[float]] = {False: [], True: []}

    def first(*, launched: bool) -> float:
        sandbox = get_sandbox("bwrap")
        sandbox.persistent = True
        env = Environment(workspace=workspace, sandbox=sandbox, python=python)
        try:
            started = time.perf_counter()
            agent = agent_popen(sandbox=sandbox, entrypoint="mlab_agents.sdk", trusted=True)
            if launched:
                env.kept_sandbox_launch()  # as RunSession.agent_started, once the agent's process is started
            agent = run_process(agent, timeout=60)
            assert agent.exit_code == 0, agent.stderr
            agent_starts[launched].append(time.perf_counter() - started)
            started = time.perf_counter()
            outcome = env.execute("Execute Script", {"script_name": "hello.py"})
            took = time.perf_counter() - started
        finally:
            env.close()
        assert "hello" in outcome.observation, outcome.observation
        return took

    def bare() -> float:
        started = time.perf_counter()
        subprocess.run([python, "-u", "hello.py"], cwd=workspace, capture_output=True, check=True)
        return time.perf_counter() - started

    arms = {
        "bare subprocess.run": bare,
        "sandbox started by the first script": lambda: first(launched=False),
        "sandbox launched as the agent starts": lambda: first(launched=True),
    }
    for arm in arms.values():  # warm
        arm()
    agent_starts[False].clear()
    agent_starts[True].clear()
    times = {name: [] for name in arms}
    names = list(arms)
    for i in range(repeats):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            times[name].append(arms[name]())
    print(f"A run's first Execute Script of print('hello'), {repeats} interleaved rounds, bwrap:")
    for name, seconds in times.items():
        print(summary(f"  {name}", seconds))
    bare_times = times["bare subprocess.run"]
    for name, seconds in list(times.items())[1:]:
        overhead = statistics.median(seconds) * 1000 - statistics.median(bare_times) * 1000
        paired = statistics.median(s - b for s, b in zip(seconds, bare_times, strict=True)) * 1000
        print(f"  overhead, {name:<37} {overhead:7.1f} ms   paired (median of each round's) {paired:7.1f} ms")
    print("Before the first script: the agent's start (its sandbox, the interpreter, the SDK's import):")
    print(summary("  alone", agent_starts[False]))
    print(summary("  beside the launch of the scripts' sandbox", agent_starts[True]))


if __name__ == "__main__":
    main()
