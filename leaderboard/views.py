from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from runner.models import Run
from runner.selectors import runs_list
from task_bank.models import Task


def home_view(request: HttpRequest) -> HttpResponse:
    counts = Run.objects.aggregate(
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
