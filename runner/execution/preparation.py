"""Preparing a task version: run its prepare.py once (cached, in the sandbox) and store its env as blobs."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from task_bank.models import TaskVersion
from task_bank.package import TaskPackageError, is_read_only, iter_files

from ..actions.environment import TaskPackages, packages_env, packages_mounts
from ..sandbox import Limits, Mount, Sandbox
from ..sandbox.identity import owned_by_root, writable_for_sandbox
from ..sandbox.process import run_process
from ..workspace.snapshots import BlobStore, Manifest
from .sandboxes import get_sandbox
from .task_packages import TaskPackagesError, file_lock, staged_folder, task_packages_install


class TaskPreparationError(Exception):
    """prepare.py failed; the message carries its own output."""


@dataclass
class PreparedTask:
    version: TaskVersion
    root: Path
    env_manifest: Manifest
    env_manifest_sha: str
    prepare_log: str
    #: The task's own packages, installed (``task_packages``); None when it needs none.
    packages: TaskPackages | None = None

    def package_mounts(self) -> list[Mount]:
        """The task's packages, read-only where its code runs."""
        return packages_mounts(self.packages)

    def package_env(self) -> dict[str, str]:
        """What puts the task's packages first on its code's path."""
        return packages_env(self.packages)

    @property
    def scripts_dir(self) -> Path:
        return self.root / "scripts"

    @property
    def read_only_files(self) -> list[str]:
        return sorted(p for p in self.env_manifest if is_read_only(p, self.version.read_only_patterns))


def prepare_secrets(*, network: bool) -> dict[str, str]:
    """What only prepare.py is given: the deployment's secret seed for generated data and, where it may reach the
    network, the Kaggle credentials MLAgentBench's folders download their competitions' files with."""
    secrets = {"BENCH_TASK_SEED": settings.BENCH_TASK_SEED}
    if network and settings.BENCH_KAGGLE_USERNAME and settings.BENCH_KAGGLE_KEY:
        secrets |= {"KAGGLE_USERNAME": settings.BENCH_KAGGLE_USERNAME, "KAGGLE_KEY": settings.BENCH_KAGGLE_KEY}
    return secrets


def cache_dir(version: TaskVersion) -> Path:
    return Path(settings.BENCH_TASK_CACHE_DIR) / version.digest


def _run_prepare(
    work: Path,
    version: TaskVersion,
    sandbox: Sandbox,
    tick: Callable[[], None] | None,
    on_output: Callable[[str, bytes], None] | None,
    *,
    packages: TaskPackages | None = None,
) -> str:
    network = version.prepare_needs_network and getattr(settings, "BENCH_ALLOW_PREPARE_NETWORK", False)
    if version.prepare_needs_network and not network:
        raise TaskPreparationError(
            "prepare.py needs the network (task.toml [prepare] network = true) and this deployment does not "
            "allow it (set BENCH_ALLOW_PREPARE_NETWORK=1 to allow it)"
        )
    answers = version.prepare_answers
    proc = sandbox.popen(
        [sandbox.python, "-u", "prepare.py"],
        mounts=[Mount(work, "/task", writable=True), *packages_mounts(packages)],
        cwd="/task/scripts",
        env={**packages_env(packages), **prepare_secrets(network=network)},
        limits=Limits(memory_mb=max(int(version.resources.get("memory_mb", 4096)), 2048) * 2),
        network=network,
        stdin=subprocess.PIPE if answers else subprocess.DEVNULL,
    )
    if answers:  # a few lines: written at once, then the end of its input
        proc.stdin.write((answers.rstrip("\n") + "\n").encode())
        proc.stdin.close()
    result = run_process(
        proc, timeout=settings.BENCH_PREPARE_TIMEOUT_S, keep_bytes=20_000, tick=tick, on_output=on_output
    )
    log = (result.stdout + ("\n" + result.stderr if result.stderr.strip() else "")).strip()
    if result.timed_out:
        raise TaskPreparationError(
            f"prepare.py did not finish within {settings.BENCH_PREPARE_TIMEOUT_S} s. Output:\n{log}"
        )
    if result.exit_code != 0:
        hint = ""
        if "EOFError" in result.stderr:
            asked = result.stdout.rstrip("\n").rsplit("\n", 1)[-1].strip()
            hint = (
                f' (it asked on its standard input: "{asked[:500]}"; staff can answer on the task page, a line per '
                "question, and validate again)"
            )
        raise TaskPreparationError(f"prepare.py exited with code {result.exit_code}{hint}. Output:\n{log}")
    return log


def task_version_prepare(
    version: TaskVersion,
    *,
    sandbox: Sandbox | None = None,
    tick: Callable[[], None] | None = None,
    on_output: Callable[[str, bytes], None] | None = None,
) -> PreparedTask:
    """The prepared task (cached by digest): its packages are installed, prepare.py has run and the env files are
    blobs.

    tick is called while prepare.py runs or another process holds the preparation lock (heartbeats); on_output
    gets what prepare.py writes, as it writes it."""
    root = cache_dir(version)
    store = BlobStore()
    sandbox = sandbox or get_sandbox()
    try:
        packages = task_packages_install(version, python=sandbox.python, tick=tick)
    except TaskPackagesError as exc:
        raise TaskPreparationError(f"the task's packages ([environment] packages): {exc}") from exc
    with file_lock(root.with_suffix(".lock"), tick=tick):
        marker = root / "prepared.json"
        if not marker.exists():
            with staged_folder(root, prefix=f".{version.digest[:12]}-") as work:
                shutil.copytree(version.package_path, work, dirs_exist_ok=True)
                (work / "env").mkdir(exist_ok=True)
                log = ""
                if (work / "scripts" / "prepare.py").is_file():
                    writable_for_sandbox(work, sandbox.ids, sticky=False)
                    log = _run_prepare(work, version, sandbox, tick, on_output, packages=packages)
                    owned_by_root(work, sandbox.ids)  # what prepare.py made becomes shared, read-only task data
                sha = _env_store(work, version, store)
                (work / "prepared.json").write_text(json.dumps({"env_manifest": sha, "log": log}))
        info = json.loads(marker.read_text())
        if not _blobs_present(store, info["env_manifest"]):
            info["env_manifest"] = _env_store(root, version, store)  # the collector took them: stored again
    return PreparedTask(
        version=version,
        root=root,
        env_manifest=store.manifest_load(info["env_manifest"]),
        env_manifest_sha=info["env_manifest"],
        prepare_log=info.get("log", ""),
        packages=packages,
    )


def _env_store(root: Path, version: TaskVersion, store: BlobStore) -> str:
    """Store a prepared folder's env/ files as blobs (read-only ones hard-linked); the sha of their manifest."""
    manifest: Manifest = {}
    try:
        files = list(iter_files(root / "env"))
    except TaskPackageError as exc:
        raise TaskPreparationError(f"after prepare.py, env/{exc}") from exc
    for rel, path in files:
        sha, size = store.put_file(path, link=is_read_only(rel, version.read_only_patterns))
        manifest[rel] = [sha, size]
    return store.manifest_save(manifest)


def _blobs_present(store: BlobStore, manifest_sha: str) -> bool:
    """Whether a prepared task's env manifest and every blob it lists are stored (each has its time set to now, so
    the collector keeps them while they are in use)."""
    if not store.fresh(manifest_sha):
        return False
    return all(store.fresh(sha) for sha, _size in store.manifest_load(manifest_sha).values())


def prepared_env_listing(version: TaskVersion, *, hidden: bool = False) -> list[dict] | None:
    """What the agent sees (env/) or, with hidden, the task's hidden scripts/ folder: [{path, size,
    read_only}]. From the prepared cache when prepare.py has run, else from the package. None if absent."""
    prepared = cache_dir(version)
    base = (prepared if (prepared / "prepared.json").exists() else Path(version.package_path)) / (
        "scripts" if hidden else "env"
    )
    if not base.is_dir():
        return None
    return [
        {
            "path": rel,
            "size": path.stat().st_size,
            "read_only": not hidden and is_read_only(rel, version.read_only_patterns),
        }
        for rel, path in iter_files(base)
    ]
