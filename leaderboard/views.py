from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from runner.preparation import prepared_env_listing
from runner.selectors import runs_list
from task_bank.models import Task

from .charts import cost_vs_success_figure, success_by_task_figure
from .exports import leaderboard_csv, leaderboard_json
from .selectors import (
    entrant_key,
    entrant_parse,
    home_page,
    leaderboard_compare,
    leaderboard_matrix,
    leaderboard_rows,
    task_agent_rows,
    task_detail,
    task_versions,
    tasks_list,
)


def home_view(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/home.html", home_page(viewer=request.user))


def task_list_view(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/task_list.html", {"tasks": tasks_list(viewer=request.user)})


def task_detail_view(request: HttpRequest, slug: str) -> HttpResponse:
    try:
        task = task_detail(slug=slug)
    except Task.DoesNotExist:
        raise Http404(f"no task {slug}") from None
    version = task.current_version
    include_infrastructure = request.GET.get("infra") == "include"
    context = {
        "task": task,
        "version": version,
        "versions": task_versions(task=task),
        "files": prepared_env_listing(version),
        "hidden_files": prepared_env_listing(version, hidden=True) if request.user.is_staff else None,
        "rows": task_agent_rows(viewer=request.user, version=version, include_infrastructure=include_infrastructure),
        "include_infrastructure": include_infrastructure,
        "ranking": "with-infrastructure" if include_infrastructure else "counted",
        "runs": runs_list(viewer=request.user, task=task.slug)[:20],
    }
    return render(request, "leaderboard/task_detail.html", context)


def leaderboard_view(request: HttpRequest) -> HttpResponse:
    current_only = request.GET.get("versions") != "all"
    include_infrastructure = request.GET.get("infra") == "include"
    board = leaderboard_matrix(
        viewer=request.user, current_only=current_only, include_infrastructure=include_infrastructure
    )
    export = request.GET.get("format")
    if export == "csv":
        response = HttpResponse(leaderboard_csv(board["rows"]), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="leaderboard.csv"'
        return response
    if export == "json":
        options = {"current_only": current_only, "include_infrastructure": include_infrastructure}
        return JsonResponse(leaderboard_json(board, **options), json_dumps_params={"indent": 2})
    context = {
        "matrix": board["matrix"],
        "tasks": board["tasks"],
        "current_only": current_only,
        "include_infrastructure": include_infrastructure,
        "ranking": "with-infrastructure" if include_infrastructure else "counted",
        "charts": {
            "success_by_task": success_by_task_figure(board["cells"]) if board["cells"] else None,
            "cost_vs_success": cost_vs_success_figure(board["rows"]) if board["cells"] else None,
        },
    }
    return render(request, "leaderboard/leaderboard.html", context)


def leaderboard_compare_view(request: HttpRequest) -> HttpResponse:
    """Two leaderboard rows, paired on the tasks both ran: chosen with ?a= and ?b= (agent@version[/model])."""
    current_only = request.GET.get("versions") != "all"
    include_infrastructure = request.GET.get("infra") == "include"
    options = {"current_only": current_only, "include_infrastructure": include_infrastructure}
    rows = leaderboard_rows(viewer=request.user, **options)
    keys = [entrant_key(r) for r in rows]
    chosen = {side: request.GET.get(side, "") for side in ("a", "b")}
    context = {"keys": keys, "chosen": chosen, "error": None, "comparison": None, **options}
    if chosen["a"] and chosen["b"]:
        unknown = [key for key in chosen.values() if key not in keys]
        if unknown:
            context["error"] = f"No leaderboard row {unknown[0]!r}; choose two of the rows listed."
        elif chosen["a"] == chosen["b"]:
            context["error"] = "Choose two different rows."
        else:
            a, b = (entrant_parse(chosen[side]) for side in ("a", "b"))
            context["comparison"] = leaderboard_compare(viewer=request.user, a=a, b=b, **options)
    return render(request, "leaderboard/compare.html", context, status=400 if context["error"] else 200)
