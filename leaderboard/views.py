from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from runner.preparation import prepared_env_listing
from runner.selectors import runs_list
from task_bank.models import Task

from .charts import cost_vs_success_figure, success_by_task_figure
from .exports import leaderboard_csv, leaderboard_json
from .selectors import home_page, leaderboard_matrix, task_agent_rows, task_detail, task_versions, tasks_list


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
