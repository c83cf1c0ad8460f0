"""The log upload page: an MLAgentBench log imported as a self-reported run."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from task_bank.models import Task, TaskVersion

from ..forms import TraceUploadForm, form_throttled
from ..throttles import TraceUploadThrottle
from .imports import TraceImportError, trace_upload, upload_default_agent


@login_required
def trace_upload_view(request: HttpRequest) -> HttpResponse:
    """Upload an MLAgentBench log: imported as ``import_trace`` does, as a self-reported run under an agent of one's
    own, its final workspace scored by a worker's job; refused with the reason (nothing kept), or the run's page."""
    ready = Task.objects.filter(is_enabled=True, current_version__status=TaskVersion.Status.READY)  # what it accepts
    tasks = list(ready.order_by("slug").values_list("slug", "title"))
    form = TraceUploadForm(request.POST or None, request.FILES or None, tasks=tasks)
    form.fields["agent"].help_text += f" else {upload_default_agent(request.user)}."
    status = 200
    if request.method == "POST" and form.is_valid():
        if form_throttled(request, form, TraceUploadThrottle, "uploads"):
            status = 429
        else:
            data = form.cleaned_data
            try:
                run = trace_upload(
                    upload=data["log"],
                    owner=request.user,
                    task_slug=data["task"] or None,
                    agent_name=data["agent"] or None,
                    model=data["model"] or None,
                )
            except TraceImportError as exc:
                form.add_error("log", str(exc))
                status = 400
            else:
                messages.success(
                    request,
                    f"run {run.pk} imported: self-reported, {run.steps_count} steps; its final workspace is being "
                    "scored in the sandbox",
                )
                return redirect(reverse("runner:run_detail", args=[run.pk]))
    elif request.method == "POST":
        status = 400
    return render(request, "runner/trace_upload.html", {"form": form}, status=status)
