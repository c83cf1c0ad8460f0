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
    return Step.objects.filter(run=run).order_by("index").prefetch_related("llm_calls")


def run_trace_json(*, run: Run) -> dict:
    """The run's trace in MLAgentBench's trace.json shape (steps, low_level_steps, action_infos,
    task_description), with each step's agent entries added under "entries"."""
    from .actions import ACTIONS

    steps, low_level = [], []
    for step in run_steps(run=run):
        timestamp = (step.started_at.timestamp() + step.duration_s) if step.started_at else None
        steps.append(
            {
                "action": {"name": step.action, "args": step.action_input},
                "observation": step.observation,
                "timestamp": timestamp,
                "entries": step.entries,
            }
        )
        for low in step.low_level:
            low_level.append(
                {
                    "action": {"name": low.get("action"), "args": low.get("input", {})},
                    "observation": low.get("observation", ""),
                    "timestamp": timestamp,
                }
            )
    return {
        "steps": steps,
        "low_level_steps": low_level,
        "action_infos": {
            spec.name: spec.as_dict() | {"function": spec.name.lower().replace(" ", "_")} for spec in ACTIONS
        },
        "task_description": run.task_version.research_problem,
    }
