"""The collector: what the data folder keeps that nothing names any more goes (``blobs_collect``), by the command
``manage.py collect_blobs`` and the periodic job ``runner.collect_blobs`` (``BENCH_BLOB_COLLECT_EVERY_S``).

Blobs are marked from every name the database and the prepared tasks hold: the runs' initial and final snapshots,
each step's snapshot, full observation and stored action input, and the env manifest of each task this host has
prepared; a manifest marks the blobs it lists and the base it is a delta of. What is not marked and is older than
``BENCH_BLOB_COLLECT_GRACE_S`` is removed: deleting a run (with its steps) frees what only it held once its blobs
are past the grace period. A blob stored again has its time set to now (``BlobStore._fresh``), and the collector
moves a blob aside before it looks at its time a last time, so a blob a step is about to name is never removed in
between: a store that finds it gone stores it anew. Agent package folders no agent uses and prepared folders of
task versions that are gone go too. A host that prepared a task keeps its folder; its blobs are marked only where
the task's runs name them, so a cached preparation whose blobs are gone is made again
(``preparation.task_version_prepare``)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from task_bank.models import TaskVersion

from ..models import Agent, Run, Step
from ..workspace.snapshots import DELTA_KEY, BlobStore
from .recording import STORED_INPUT

log = logging.getLogger(__name__)

#: Where a blob is moved while the collector looks at its time a last time.
ASIDE_SUFFIX = ".collecting"


@dataclass
class Collected:
    """What a pass found and removed: blobs kept and removed, the bytes on disk it freed, folders removed."""

    kept: int = 0
    removed: int = 0
    freed_bytes: int = 0
    folders: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"kept": self.kept, "removed": self.removed, "freed_bytes": self.freed_bytes, "folders": self.folders}


def blobs_collect(*, grace_s: float | None = None, dry_run: bool = False) -> Collected:
    """Remove the blobs nothing names that are older than ``grace_s`` (``BENCH_BLOB_COLLECT_GRACE_S``), and the
    agent package and prepared task folders nothing uses; ``dry_run`` only counts them."""
    grace_s = settings.BENCH_BLOB_COLLECT_GRACE_S if grace_s is None else grace_s
    store = BlobStore()
    named = blobs_named(store)
    done = Collected()
    cutoff = time.time() - grace_s
    for path, sha in _stored(store):
        if sha in named:
            done.kept += 1
            if path.name.endswith(ASIDE_SUFFIX):  # a pass that stopped midway left it aside
                os.replace(path, path.with_name(path.name.removesuffix(ASIDE_SUFFIX)))
            continue
        freed = _remove_if_old(path, cutoff, dry_run=dry_run)
        if freed is None:
            done.kept += 1
        else:
            done.removed += 1
            done.freed_bytes += freed
    done.folders = [str(path) for path in _unused_folders(cutoff, dry_run=dry_run)]
    log.info("blobs collected: %s", done.as_json())
    return done


def blobs_named(store: BlobStore) -> set[str]:
    """Every blob a row or a prepared task names, with the blobs of the manifests among them."""
    named: set[str] = set()
    manifests: list[str] = []
    for initial, final in Run.objects.values_list("initial_snapshot", "final_snapshot").iterator(chunk_size=5000):
        manifests += [sha for sha in (initial, final) if sha]
    steps = Step.objects.values_list("snapshot", "observation_blob", "action_input")
    for snapshot, observation, action_input in steps.iterator(chunk_size=5000):
        if snapshot:
            manifests.append(snapshot)
        if observation:
            named.add(observation)
        if isinstance(action_input, dict) and STORED_INPUT in action_input:  # recording._bounded_input
            named.add(str(action_input.get("blob", "")))
    manifests += list(_prepared_manifests())
    for sha in manifests:
        _mark_manifest(store, sha, named)
    return named


def _mark_manifest(store: BlobStore, sha: str, named: set[str]) -> None:
    """Mark a manifest, what it lists and the bases it is a delta of (each manifest read once)."""
    while sha and sha not in named:
        named.add(sha)
        try:
            manifest = json.loads(store.read_bytes(sha))
        except (FileNotFoundError, ValueError, OSError) as exc:
            log.warning("manifest %s cannot be read (%s): what it lists is not marked", sha, exc)
            return
        header = manifest.pop(DELTA_KEY, None)
        named.update(entry[0] for entry in manifest.values() if isinstance(entry, list) and entry)
        sha = header.get("base", "") if isinstance(header, dict) else ""


def _prepared_manifests() -> Iterator[str]:
    root = Path(settings.BENCH_TASK_CACHE_DIR)
    for marker in root.glob("*/prepared.json") if root.is_dir() else []:
        try:
            yield json.loads(marker.read_text())["env_manifest"]
        except (OSError, ValueError, KeyError) as exc:
            log.warning("%s cannot be read: %s", marker, exc)


def _stored(store: BlobStore) -> Iterator[tuple[Path, str]]:
    """(path, sha) of every blob file, as it is or packed; temporary files of writes that died, as sha ""."""
    with os.scandir(store.root) as top:
        for shard in top:
            if shard.name.startswith(".tmp-"):
                yield Path(shard.path), ""
            if len(shard.name) != 2 or not shard.is_dir(follow_symlinks=False):
                continue
            with os.scandir(shard.path) as files:
                for entry in files:
                    name = entry.name.removesuffix(ASIDE_SUFFIX)
                    yield Path(entry.path), shard.name + name.removesuffix(".z")


def _remove_if_old(path: Path, cutoff: float, *, dry_run: bool) -> int | None:
    """Remove a blob nothing names if its time is before ``cutoff``: the bytes on disk freed, or None (kept). The
    blob is moved aside first, then its time read: a store that set it meanwhile had it still in place (it is put
    back), and one that comes later finds it gone and stores it anew."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    if st.st_mtime >= cutoff:
        return None
    if dry_run:
        return st.st_blocks * 512
    aside = path if path.name.endswith(ASIDE_SUFFIX) else path.with_name(path.name + ASIDE_SUFFIX)
    try:
        os.rename(path, aside)
        st = aside.lstat()
        if st.st_mtime >= cutoff:  # stored again while it was looked at
            os.rename(aside, path.with_name(aside.name.removesuffix(ASIDE_SUFFIX)))
            return None
        os.unlink(aside)
    except FileNotFoundError:
        return None
    return st.st_blocks * 512 if st.st_nlink == 1 else 0


def _unused_folders(cutoff: float, *, dry_run: bool) -> Iterator[Path]:
    """Agent package folders no agent uses, prepared task folders of versions that are gone (older than cutoff)."""
    kinds = [
        (Path(settings.BENCH_DATA_DIR) / "agent_packages", Agent.objects.values_list("package_digest", flat=True)),
        (Path(settings.BENCH_TASK_CACHE_DIR), TaskVersion.objects.values_list("digest", flat=True)),
    ]
    for root, names in kinds:
        used = set(names)
        for folder in root.iterdir() if root.is_dir() else []:
            unused = folder.is_dir() and not folder.name.startswith(".") and folder.name not in used
            if unused and folder.stat().st_mtime < cutoff:
                yield _remove_folder(folder, dry_run=dry_run)


def _remove_folder(folder: Path, *, dry_run: bool) -> Path:
    if not dry_run:
        shutil.rmtree(folder, ignore_errors=True)
        folder.with_suffix(".lock").unlink(missing_ok=True)
    return folder
