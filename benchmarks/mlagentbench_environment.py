"""MLAgentBench's Python environment as the platform installs it (task_bank/mlagentbench-environment.txt, what a
bare MLAgentBench folder gets by default): proves it works in the sandbox and measures it.

1. The pinned list is installed by the worker's own code (``task_packages_install``: wheels only, into
   ``<packages dir>/<digest>``), unless it is there already; then asked for again, which must be instant. Prints
   the number of packages, the install's wall time, its size on disk (du) and whether it was there already.
2. In the configured sandbox (bwrap here), with the folder mounted and on the path as a task's scripts get it,
   one Python process imports the packages MLAgentBench's tasks use, in the order listed, and prints each one's
   version, import time (what that import added, the ones before it already loaded), where it came from, and the
   modules that came from the interpreter's own site-packages instead; then each is imported alone in a fresh
   process, for its time from nothing. Then the ``kaggle`` command, from the folder's bin/, is run without
   credentials: it must be found and ask for them.
3. With ``--mlagentbench DIR`` (a checkout of MLAgentBench, or its bare git directory), the vectorization task's
   starter ``train.py`` (read from DIR, never copied here) runs in a scratch workspace in the sandbox twice: with
   the environment, and with the platform's own packages only. Under the platform's NumPy 2 it is expected to fail
   ("setting an array element with a sequence"); under the environment's NumPy 1.24.3 to write submission.csv.

The install is about 6.5 GB from the package registry: expect several minutes the first time.

    .venv/bin/python benchmarks/mlagentbench_environment.py [--packages-dir DIR] \\
        [--mlagentbench /work/.mirror/snap-stanford+MLAgentBench/repo]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODULES = (
    "numpy", "pandas", "scipy", "sklearn", "matplotlib", "seaborn", "torch", "torchvision", "transformers",
    "datasets", "accelerate", "peft", "evaluate", "torch_geometric", "ogb", "xgboost", "tensorflow", "keras",
)  # fmt: skip
# Imports each module named on its command line: a JSON line per module (an error: the files its traceback went
# through), then a line naming the modules loaded from the interpreter's own site-packages, not the environment.
IMPORTS = """
import importlib, json, sys, sysconfig, time, traceback
for name in sys.argv[1:]:
    started = time.perf_counter()
    try:
        module = importlib.import_module(name)
    except BaseException as exc:
        files = [frame.filename for frame in traceback.extract_tb(exc.__traceback__)]
        print(json.dumps({"name": name, "error": f"{type(exc).__name__}: {exc}", "files": files}), flush=True)
        continue
    seconds = time.perf_counter() - started
    where = getattr(module, "__file__", None) or ""
    print(json.dumps({"name": name, "version": str(getattr(module, "__version__", "?")), "s": seconds,
                      "file": where}), flush=True)
own = sysconfig.get_paths()["purelib"] + "/"
loaded = {n.split(".")[0] for n, m in list(sys.modules.items()) if (getattr(m, "__file__", None) or "").startswith(own)}
print(json.dumps({"own": own, "loaded": sorted(loaded)}))
"""
STARTER = "MLAgentBench/benchmarks/vectorization/env/train.py"


def du_mb(folder: Path, *apparent: str) -> int:
    out = subprocess.run(["du", "-s", "--block-size=1M", *apparent, str(folder)], capture_output=True, text=True)
    return int(out.stdout.split()[0])


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def first_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def install(packages: list[str], python: str):
    """The environment's folder, installed by the worker's code if need be; prints what it took."""
    from runner.execution.task_packages import packages_folder, task_packages_install

    folder = packages_folder(packages, python)
    there = (folder / ".installed.json").exists()
    print(f"packages: {len(packages)} pinned, for {python}")
    print(f"folder: {folder} ({'already installed' if there else 'not installed yet: installing'})")
    started = time.monotonic()
    last = [started]
    log = folder.with_suffix(".log")

    def tick() -> None:  # pip's latest line, once a minute
        if time.monotonic() - last[0] >= 60:
            last[0] = time.monotonic()
            said = last_line(log.read_text(errors="replace")) if log.exists() else ""
            print(f"  ... {time.monotonic() - started:.0f} s: {said[:100]}", flush=True)

    # The worker's own function; it reads only the version's package list, the whole environment as a bare
    # MLAgentBench folder's.
    version = SimpleNamespace(task_packages=packages, packages_alone=True)
    installed = task_packages_install(version, python=python, tick=tick)
    assert installed.folder == folder and installed.alone
    took = time.monotonic() - started
    print(f"install: {took:.1f} s wall{' (nothing to do: it was there)' if there else ''}")
    started = time.monotonic()
    assert task_packages_install(version, python=python, tick=tick) == installed
    print(f"asked again: {(time.monotonic() - started) * 1000:.1f} ms (installed once)")
    files = sum(1 for _ in folder.rglob("*"))
    print(f"size: {du_mb(folder)} MB on disk (du), {du_mb(folder, '--apparent-size')} MB apparent, {files} entries")
    return installed


def sandboxed(sandbox, argv: list[str], *, mounts, env: dict, cwd: str = "/", timeout: float = 900):
    """Runs argv in the sandbox; its result and the wall time, the sandbox's start included."""
    from runner.sandbox import Limits
    from runner.sandbox.process import run_process

    started = time.monotonic()
    proc = sandbox.popen(argv, mounts=mounts, cwd=cwd, env=env, limits=Limits())
    result = run_process(proc, timeout=timeout, keep_bytes=200_000)
    return result, time.monotonic() - started


def imports(sandbox, packages) -> int:
    """Imports MODULES in the sandbox with the environment, all in one process, then each in a fresh one; prints a
    table. Returns how many failed."""
    from runner.actions.environment import PACKAGES_TARGET, packages_env, packages_mounts, script_env

    env = packages_env(packages) | script_env(cpus=2, gpus=0)
    mounts = packages_mounts(packages)
    result, wall = sandboxed(sandbox, [sandbox.python, "-c", IMPORTS, *MODULES], mounts=mounts, env=env)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    rows = {row["name"]: row for row in lines if "name" in row}
    alone = {}  # the module's import time in a fresh process: nothing before it loaded
    for name in MODULES:
        fresh, _ = sandboxed(sandbox, [sandbox.python, "-c", IMPORTS, name], mounts=mounts, env=env)
        row = next((json.loads(line) for line in fresh.stdout.splitlines() if line.startswith('{"name"')), {})
        alone[name] = f"{row['s']:.2f}" if "s" in row else "failed"
    print(f"\nimports in the sandbox ({sandbox.name}), all in one process: exit {result.exit_code}, {wall:.1f} s wall, "
          f"{result.max_rss_mb:.0f} MB peak memory. 'in turn': in that process, in this order (what the import "
          "added to those before it); 'alone': in a fresh process of its own")  # fmt: skip
    print(f"{'module':<16} {'version':<14} {'in turn s':>9} {'alone s':>8}  from")
    failed = 0
    for name in MODULES:
        row = rows.get(name, {"error": "no answer (the process ended)", "files": []})
        if "error" in row:
            failed += 1
            outside = [f for f in row["files"] if "site-packages" in f and not f.startswith(PACKAGES_TARGET + "/")]
            print(f"{name:<16} FAILED: {row['error'][:300]}")
            if outside:
                print(f"{'':<16} through the platform's own packages, first: {outside[0]}")
            continue
        where = "environment" if row["file"].startswith(PACKAGES_TARGET + "/") else f"elsewhere: {row['file']}"
        print(f"{name:<16} {row['version']:<14} {row['s']:>9.2f} {alone[name]:>8}  {where}")
    for line in lines:
        if "loaded" in line:
            print(
                f"loaded from the interpreter's own {line['own']} ({len(line['loaded'])}): {' '.join(line['loaded'])}"
            )
    if result.exit_code != 0 or failed:
        print(f"stderr's end: {result.stderr[-1500:]}")
    return failed


def kaggle(sandbox, packages) -> None:
    """The kaggle command, found on PATH from the environment's bin/, without credentials."""
    from runner.actions.environment import packages_env, packages_mounts, script_env

    env = packages_env(packages) | script_env(cpus=2, gpus=0)
    result, wall = sandboxed(sandbox, ["kaggle", "competitions", "list"], mounts=packages_mounts(packages), env=env)
    said = result.stdout + result.stderr
    print(f"\nkaggle competitions list: exit {result.exit_code}, {wall:.1f} s wall")
    print(f"  first line: {first_line(said)}")
    print(f"  last line:  {last_line(said)}")


def starter_text(checkout: Path) -> str:
    """vectorization's train.py from a checkout of MLAgentBench, or from its bare git directory's HEAD."""
    if (checkout / STARTER).is_file():
        return (checkout / STARTER).read_text()
    shown = ["git", f"--git-dir={checkout}", "show", f"HEAD:{STARTER}"]
    return subprocess.run(shown, check=True, capture_output=True, text=True).stdout


def vectorization(sandbox, installed, checkout: Path) -> None:
    """The starter run twice in a fresh workspace: with the environment, and with the platform's packages."""
    from runner.actions.environment import packages_env, packages_mounts, script_env
    from runner.actions.types import WORKSPACE
    from runner.sandbox import Mount
    from runner.sandbox.identity import writable_for_sandbox

    text = starter_text(checkout)
    print(f"\nvectorization's train.py from {checkout} ({len(text)} characters), in the sandbox:")
    for label, packages in (("environment", installed), ("platform's", None)):
        with tempfile.TemporaryDirectory(prefix="mlab-vectorization-") as tmp:
            workspace = Path(tmp)
            (workspace / "train.py").write_text(text)
            writable_for_sandbox(workspace, sandbox.ids)
            mounts = [Mount(workspace, WORKSPACE, writable=True), *packages_mounts(packages)]
            env = packages_env(packages) | script_env(cpus=2, gpus=0)
            result, wall = sandboxed(sandbox, [sandbox.python, "-u", "train.py"], mounts=mounts, env=env, cwd=WORKSPACE)
            said = last_line(result.stderr) if result.exit_code else last_line(result.stdout)
            wrote = (workspace / "submission.csv").is_file()
            print(f"  {label + ' packages':<22} exit {result.exit_code}, {wall:.1f} s wall, "
                  f"submission.csv {'written' if wrote else 'not written'}")  # fmt: skip
            print(f"  {'':<22} last line: {said}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages-dir", default="", help="where lists are installed (BENCH_TASK_PACKAGES_DIR)")
    parser.add_argument("--mlagentbench", default="", help="a checkout of MLAgentBench, or its bare git directory")
    args = parser.parse_args()
    if args.packages_dir:
        os.environ["BENCH_TASK_PACKAGES_DIR"] = str(Path(args.packages_dir).resolve())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from runner.execution.sandboxes import get_sandbox
    from task_bank.mlagentbench import environment

    sandbox = get_sandbox()
    packages = install(list(environment()), sandbox.python)
    failed = imports(sandbox, packages)
    kaggle(sandbox, packages)
    if args.mlagentbench:
        vectorization(sandbox, packages, Path(args.mlagentbench))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
