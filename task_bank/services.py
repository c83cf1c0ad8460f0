"""Writes to the task bank: importing packages as tasks and versions."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from django.conf import settings
from django.db import transaction

from .archive import archive_create, extracted
from .mlagentbench import bare_folder_packages
from .models import Task, TaskVersion
from .package import (
    MetricDirectionUnknown,
    TaskPackage,
    iter_files,
    metric_is_timed,
    mlagentbench_baseline,
    package_digest,
    package_load,
    slug_from_name,
)

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"


def packages_dir() -> Path:
    return Path(settings.BENCH_DATA_DIR) / "task_packages"


def _store_package(package: TaskPackage, digest: str) -> Path:
    """Copy the package files to the package store under their digest (atomically, once)."""
    dest = packages_dir() / digest
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=dest.parent))
    try:
        for rel, path in iter_files(package.root):
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        tmp.rename(dest)
    except FileExistsError:
        shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def task_import(
    *,
    root: Path,
    slug: str | None = None,
    source: str = Task.Source.IMPORTED,
    metric_name: str | None = None,
    higher_is_better: bool | None = None,
) -> tuple[TaskVersion, bool]:
    """Import a task folder. Returns (version, created): same files as an existing version = no new version.

    Options override or complete the manifest; the metric direction must come from one of them.
    """
    package = package_load(Path(root), slug=slug)
    manifest = package.manifest
    if metric_name:  # a bare MLAgentBench folder names its metric here ("seconds" makes it timed)
        manifest = replace(manifest, metric_name=metric_name, timed=manifest.timed or metric_is_timed(metric_name))
    if higher_is_better is not None:
        manifest = replace(manifest, higher_is_better=higher_is_better)
    if not (package.root / "task.toml").is_file():  # a bare MLAgentBench folder
        if manifest.script_time_s is None:
            manifest = replace(manifest, script_time_s=0)  # its scripts have no limit of their own
        # MLAgentBench gives each run the GPU its --device names: here the deployment's GPUs, when it has them.
        manifest = replace(manifest, gpus=settings.BENCH_BARE_FOLDER_GPUS)
        # and its Python environment: here MLAgentBench's of its time, unless the deployment says otherwise.
        manifest = replace(manifest, packages=(packages := bare_folder_packages()), packages_alone=bool(packages))
    if manifest.baseline is None and (fixed := mlagentbench_baseline(Path(root).name)) is not None:
        manifest = replace(manifest, baseline=fixed)  # an MLAgentBench folder, with the baseline its plot.py fixes
    if manifest.higher_is_better is None:
        raise MetricDirectionUnknown(
            f"{package.slug}: the metric direction is unknown; set metric.higher_is_better in task.toml "
            "or give --higher-is-better / --lower-is-better"
        )
    digest = package_digest(package.root)
    was_stored = (packages_dir() / digest).is_dir()
    stored = _store_package(package, digest)
    try:
        return _version_record(package, manifest, digest, stored, source)
    except BaseException:
        if not was_stored and not TaskVersion.objects.filter(digest=digest).exists():
            shutil.rmtree(stored, ignore_errors=True)  # nothing is left half-imported
        raise


def _version_record(package: TaskPackage, manifest, digest: str, stored: Path, source: str) -> tuple[TaskVersion, bool]:
    with transaction.atomic():
        task, _ = Task.objects.select_for_update().get_or_create(
            slug=package.slug,
            defaults={"title": manifest.title, "category": manifest.category, "source": source},
        )
        existing = TaskVersion.objects.filter(task=task, digest=digest).first()
        if existing is not None:
            if task.current_version_id != existing.pk:
                task.current_version = existing
                task.save(update_fields=["current_version", "updated_at"])
            return existing, False
        last = task.versions.order_by("-number").values_list("number", flat=True).first() or 0
        version = TaskVersion.objects.create(
            task=task,
            number=last + 1,
            digest=digest,
            package_path=str(stored),
            research_problem=package.research_problem,
            metric_name=manifest.metric_name,
            higher_is_better=manifest.higher_is_better,
            success_threshold=manifest.success_threshold,
            script_name=manifest.script,
            max_steps=manifest.max_steps,
            max_time_s=manifest.max_time_s,
            resources=manifest.resources,
            data_license=manifest.data_license,
            prepare_needs_network=manifest.prepare_needs_network,
            read_only_patterns=package.read_only_patterns,
            reference_score=manifest.reference_score,
            timed=manifest.timed,
            validation_repeats=manifest.validation_repeats,
            manifest={
                "title": manifest.title,
                "category": manifest.category,
                "description": manifest.description,
                **({"serve": manifest.serve} if manifest.serve else {}),
                **({"hide": list(manifest.hide)} if manifest.hide else {}),
                **({"baseline": manifest.baseline} if manifest.baseline else {}),
                **({"packages": list(manifest.packages)} if manifest.packages else {}),
                **({"packages_alone": True} if manifest.packages_alone else {}),
                **({"ceiling": manifest.ceiling} if manifest.ceiling is not None else {}),
                **{
                    k: getattr(manifest, k)
                    for k in ("script_time_s", "script_memory_mb")
                    if getattr(manifest, k) is not None
                },
            },
        )
        task.title = manifest.title
        task.category = manifest.category
        task.current_version = version
        task.save(update_fields=["title", "category", "current_version", "updated_at"])
    return version, True


def builtin_task_dirs() -> list[Path]:
    return sorted(p for p in BUILTIN_DIR.iterdir() if p.is_dir() and (p / "scripts").is_dir())


def builtin_tasks_load() -> list[tuple[TaskVersion, bool]]:
    return [task_import(root=path, source=Task.Source.BUILTIN) for path in builtin_task_dirs()]


def task_import_source(
    *,
    source: Path,
    name: str | None = None,
    slug: str | None = None,
    source_kind: str = Task.Source.IMPORTED,
    metric_name: str | None = None,
    higher_is_better: bool | None = None,
) -> tuple[TaskVersion, bool]:
    """Import a task folder or zip. Every check runs before anything is stored: a bad package leaves nothing."""
    unpacked = extracted(Path(source), name=name)
    with unpacked as root:
        return task_import(
            root=root,
            slug=slug or slug_from_name(unpacked.name),
            source=source_kind,
            metric_name=metric_name,
            higher_is_better=higher_is_better,
        )


def task_export(*, version: TaskVersion, out: Path) -> int:
    """Write the version's package as a zip that import_task reads back; returns the number of files."""
    return archive_create(Path(version.package_path), Path(out), prefix=version.task.slug)


def task_set_enabled(*, task: Task, enabled: bool) -> None:
    Task.objects.filter(pk=task.pk).update(is_enabled=enabled)


def task_version_answers_set(*, version: TaskVersion, answers: str) -> None:
    """What the version's prepare.py reads on its standard input (``TaskVersion.prepare_answers``)."""
    TaskVersion.objects.filter(pk=version.pk).update(prepare_answers=answers)
