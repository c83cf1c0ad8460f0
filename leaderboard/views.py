from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from runner.models import Run
from runner.preparation import prepared_env_listing
from runner.selectors import runs_list
from task_bank.models import Task

from .charts import cost_vs_success_figure, success_by_task_figure
from .selectors import leaderboard_cells, leaderboard_rows, task_agent_rows, tasks_list


def home_view(request: HttpRequest) -> HttpResponse:
    counts = Run.objects.filter(purpose=Run.Purpose.BENCHMARK).aggregate(
        total=Count("pk"),
        live=Count("pk", filter=Q(status__in=Run.LIVE)),
        finished=Count("pk", filter=Q(status=Run.Status.FINISHED)),
        succeeded=Count("pk", filter=Q(succeeded=True)),
    )
    context = {
        "counts": counts,
        "task_count": Task.objects.filter(is_enabled=True).count(),
        "recent_runs": runs_list()[:10],
    }
    return render(request, "leaderboard/home.html", context)


def task_list_view(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/task_list.html", {"tasks": tasks_list()})


def task_detail_view(request: HttpRequest, slug: str) -> HttpResponse:
    task = Task.objects.select_related("current_version").filter(slug=slug).first()
    if task is None or task.current_version is None:
        raise Http404(f"no task {slug}")
    version = task.current_version
    context = {
        "task": task,
        "version": version,
        "versions": task.versions.order_by("-number"),
        "files": prepared_env_listing(version),
        "hidden_files": prepared_env_listing(version, hidden=True) if request.user.is_staff else None,
        "rows": task_agent_rows(version=version),
        "runs": runs_list(task=task.slug)[:20],
    }
    return render(request, "leaderboard/task_detail.html", context)


def leaderboard_view(request: HttpRequest) -> HttpResponse:
    current_only = request.GET.get("versions") != "all"
    rows = leaderboard_rows(current_only=current_only)
    cells = leaderboard_cells(current_only=current_only)
    tasks = sorted({c["task__slug"] for c in cells})
    matrix = []
    for row in rows:
        key = (row["agent__name"], row["agent__version"], row["model"])
        by_task = {c["task__slug"]: c for c in cells if (c["agent__name"], c["agent__version"], c["model"]) == key}
        matrix.append({"row": row, "cells": [by_task.get(t) for t in tasks]})
    context = {
        "matrix": matrix,
        "tasks": tasks,
        "current_only": current_only,
        "charts": {
            "success_by_task": success_by_task_figure(cells) if cells else None,
            "cost_vs_success": cost_vs_success_figure(rows) if rows else None,
        },
    }
    return render(request, "leaderboard/leaderboard.html", context)
