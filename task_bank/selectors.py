"""Reads of the task bank that depend on who asks."""

from __future__ import annotations

from django.db.models import QuerySet

from .mlagentbench import FOLDERS
from .models import Task, TaskVersion
from .package import slug_from_name


def tasks_shown(tasks: QuerySet[Task], *, viewer) -> QuerySet[Task]:
    """The tasks ``viewer`` may see: all for staff; for anyone else not those whose current version failed
    validation (a broken package is staff's to mend, and its log can quote hidden files)."""
    if getattr(viewer, "is_staff", False):
        return tasks
    return tasks.exclude(current_version__status=TaskVersion.Status.FAILED)


def mlagentbench_folders(*, viewer) -> list[dict]:
    """MLAgentBench's 13 task folders (``mlagentbench.FOLDERS``), each with the task imported from it here, if
    ``viewer`` may see one: a bare folder imports under its name as a slug."""
    slugs = {slug_from_name(folder.folder): folder for folder in FOLDERS}
    tasks = tasks_shown(Task.objects.filter(slug__in=slugs).select_related("current_version"), viewer=viewer)
    by_slug = {task.slug: task for task in tasks}
    return [{"folder": folder, "task": by_slug.get(slug)} for slug, folder in slugs.items()]
