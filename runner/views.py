from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from .models import Run
from .selectors import run_detail, run_steps, run_trace_json, runs_list


def run_list_view(request: HttpRequest) -> HttpResponse:
    filters = {key: request.GET.get(key) or None for key in ("status", "task", "agent")}
    page = Paginator(runs_list(**filters), 50).get_page(request.GET.get("page"))
    return render(
        request,
        "runner/run_list.html",
        {"page": page, "filters": filters, "statuses": Run.Status.choices},
    )


def run_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        run = run_detail(pk=pk)
    except Run.DoesNotExist:
        raise Http404(f"no run {pk}") from None
    context = {"run": run, "steps": list(run_steps(run=run))}
    if request.htmx:
        return render(request, "runner/run_detail.html#trace", context)
    return render(request, "runner/run_detail.html", context)


def run_trace_json_view(request: HttpRequest, pk: int) -> JsonResponse:
    try:
        run = run_detail(pk=pk)
    except Run.DoesNotExist:
        raise Http404(f"no run {pk}") from None
    response = JsonResponse(run_trace_json(run=run), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-trace.json"'
    return response


def action_catalogue_view(request: HttpRequest) -> HttpResponse:
    """The actions agents can take, as the agent receives them in its first message."""
    from .actions import catalogue_for_agent

    return render(request, "runner/actions.html", {"actions": catalogue_for_agent()})
