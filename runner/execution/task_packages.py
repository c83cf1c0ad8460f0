"""A task's own Python packages (``[environment] packages`` in task.toml): what its scripts and its evaluation import
beyond the platform's packages.

They are installed once per list and interpreter, by the worker (which reaches the package registry; no sandbox
does), into a folder of the worker's data (``BENCH_TASK_PACKAGES_DIR/<digest>``), wheels only: no package's code runs
while it is installed. The folder is mounted read-only at ``PACKAGES_TARGET`` in every sandbox the task's code runs
in (its ``prepare.py``, the workspace's scripts, the timed re-run, a served submission, ``eval.py``) and put first on
their ``PYTHONPATH`` (its commands first on ``PATH``), so the task's versions stand before the platform's; a task
whose list is its whole environment (``[environment] platform = false``) does not see the platform's. A list
that cannot be installed is the task's failure, with pip's words; one installation at a time per list (a lock),
waited for with the run's ticks."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from task_bank.models import TaskVersion

from ..actions.environment import TaskPackages


class TaskPackagesError(Exception):
    """The task's packages could not be installed (the message has pip's last words)."""


def packages_folder(packages: list[str], python: str) -> Path:
    """The folder a list of packages is installed into for ``python``: one per list and interpreter."""
    key = json.dumps({"packages": sorted(packages), "python": os.path.realpath(python)}).encode()
    return Path(settings.BENCH_TASK_PACKAGES_DIR) / hashlib.sha256(key).hexdigest()[:24]


def task_packages_install(
    version: TaskVersion, *, python: str, tick: Callable[[], None] | None = None
) -> TaskPackages | None:
    """The task's packages installed for ``python`` (None: the task needs none)."""
    packages = version.task_packages
    if not packages:
        return None
    folder = packages_folder(packages, python)
    marker = folder / ".installed.json"
    if not marker.exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(folder.with_suffix(".lock"), tick=tick):
            if not marker.exists():
                _install(packages, folder, python=python, tick=tick)
    return TaskPackages(folder, alone=version.packages_alone)


def _install(packages: list[str], folder: Path, *, python: str, tick: Callable[[], None] | None) -> None:
    log = folder.with_suffix(".log")
    try:
        with staged_folder(folder, prefix=".install-") as work:
            command = [
                python, "-m", "pip", "install", "--target", str(work), "--only-binary", ":all:", "--no-input",
                "--disable-pip-version-check", "--no-warn-script-location", "--no-compile", *packages,
            ]  # fmt: skip
            with open(log, "wb") as out:
                proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                _wait(proc, packages, tick)
            if proc.returncode != 0:
                said = log.read_text(errors="replace")[-3000:].strip()
                raise TaskPackagesError(f"pip could not install {', '.join(packages)} (wheels only): {said}")
            for path in [work, *work.rglob("*")]:  # readable by every sandbox user, written by none; commands run
                path.chmod(0o755 if path.is_dir() or path.stat().st_mode & 0o100 else 0o644)
            (work / ".installed.json").write_text(json.dumps({"packages": packages, "python": python}))
    finally:
        log.unlink(missing_ok=True)


def _wait(proc: subprocess.Popen, packages: list[str], tick: Callable[[], None] | None) -> None:
    deadline = time.monotonic() + settings.BENCH_TASK_PACKAGES_TIMEOUT_S
    while proc.poll() is None:
        if tick is not None:
            tick()
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise TaskPackagesError(
                f"installing {', '.join(packages)} did not finish within {settings.BENCH_TASK_PACKAGES_TIMEOUT_S} s "
                "(BENCH_TASK_PACKAGES_TIMEOUT_S)"
            )
        time.sleep(0.5)


@contextmanager
def staged_folder(dest: Path, *, prefix: str) -> Iterator[Path]:
    """A scratch folder beside ``dest`` that takes its place when the block ends without an error, and goes when it
    raises: a cached folder is whole or not there."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=prefix, dir=dest.parent))
    try:
        yield work
        if dest.exists():
            shutil.rmtree(dest)
        work.rename(dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


@contextmanager
def file_lock(path: Path, *, tick: Callable[[], None] | None = None):
    """An exclusive lock on ``path`` (made if need be), waited for with ``tick``: one process of the host's at a
    time prepares a task version or installs a list of packages."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if tick is not None:
                    tick()
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
