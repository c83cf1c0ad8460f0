"""Reads of the task bank that depend on who asks."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import Task, TaskVersion


def tasks_shown(tasks: QuerySet[Task], *, viewer) -> QuerySet[Task]:
    """The tasks ``viewer`` may see: all for staff; for anyone else not those whose current version failed
    validation (a broken package is staff's to mend, and its log can quote hidden files)."""
    if getattr(viewer, "is_staff", False):
        return tasks
    return tasks.exclude(current_version__status=TaskVersion.Status.FAILED)
