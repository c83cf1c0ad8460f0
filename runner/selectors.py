"""Reads for runs: lists and the trace of one run, without N+1 queries."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import Run, Step


def runs_list(*, status: str | None = None, task: str | None = None, agent: str | None = None) -> QuerySet[Run]:
    qs = Run.objects.select_related("task", "agent", "task_version").order_by("-created_at")
    if status:
        qs = qs.filter(status=status)
    if task:
        qs = qs.filter(task__slug=task)
    if agent:
        qs = qs.filter(agent__name=agent)
    return qs


def run_detail(*, pk: int) -> Run:
    return Run.objects.select_related("task", "agent", "task_version", "batch").get(pk=pk)


def run_steps(*, run: Run) -> QuerySet[Step]:
    return Step.objects.filter(run=run).order_by("index")
