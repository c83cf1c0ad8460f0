"""The workers page (staff): each worker's queues, last heartbeat and the runs it holds (``workers.py``)."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core.roles import staff_required
from runner.execution.workers import workers_overview


@staff_required
def worker_list_view(request: HttpRequest) -> HttpResponse:
    context = {"workers": workers_overview(), "stale_after_s": int(settings.BENCH_HEARTBEAT_STALE_S)}
    return render(request, "runner/worker_list.html", context)
