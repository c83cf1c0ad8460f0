"""The log upload page (an MLAgentBench log imported as a self-reported run, or an Inspect AI log as a run per
sample) and the Inspect AI log downloads."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from runner.forms import LogUploadForm, form_throttled
from runner.logs.imports import LogImportError, inspect_upload, log_upload, upload_default_agent
from runner.logs.inspect_export import inspect_log_file, inspect_log_filename, inspect_log_name
from runner.logs.inspect_read import is_inspect_name
from runner.models import Run
from runner.selectors import runs_visible_to
from runner.throttles import LogUploadThrottle
from task_bank.models import Task, TaskVersion


@login_required
def log_upload_view(request: HttpRequest) -> HttpResponse:
    """Upload an MLAgentBench log (a zip) or an Inspect AI log (``.json``, ``.eval``): imported as ``import_log``
    does, as self-reported runs under an agent of one's own (an MLAgentBench log's final workspace scored by a
    worker's job); refused with the reason (nothing kept), or the (first) run's page."""
    ready = Task.objects.filter(is_enabled=True, current_version__status=TaskVersion.Status.READY)  # what it accepts
    tasks = list(ready.order_by("slug").values_list("slug", "title"))
    form = LogUploadForm(request.POST or None, request.FILES or None, tasks=tasks)
    form.fields["agent"].help_text += f" else {upload_default_agent(request.user)}."
    status = 200
    if request.method == "POST" and form.is_valid():
        if form_throttled(request, form, LogUploadThrottle, "uploads"):
            status = 429
        else:
            data = form.cleaned_data
            inspect = is_inspect_name(data["log"].name)
            upload = {
                "upload": data["log"],
                "owner": request.user,
                "task_slug": data["task"] or None,
                "agent_name": data["agent"] or None,
                "model": data["model"] or None,
            }
            try:
                runs = inspect_upload(**upload) if inspect else [log_upload(**upload)]
            except LogImportError as exc:
                form.add_error("log", str(exc))
                status = 400
            else:
                messages.success(request, _imported(runs, inspect=inspect))
                return redirect(reverse("runner:run_detail", args=[runs[0].pk]))
    elif request.method == "POST":
        status = 400
    return render(request, "runner/log_upload.html", {"form": form}, status=status)


def _imported(runs: list[Run], *, inspect: bool) -> str:
    """What an upload imported, in words."""
    if not inspect:
        return (
            f"run {runs[0].pk} imported: self-reported, {runs[0].steps_count} steps; its final workspace is being "
            "scored in the sandbox"
        )
    listed = ", ".join(f"{run.pk} ({run.steps_count} steps)" for run in runs)
    return (
        f"{len(runs)} run{'s' if len(runs) > 1 else ''} imported from the Inspect log: {listed}; self-reported, not "
        "scored (an Inspect log holds no workspace files)"
    )


def inspect_log_response(runs: QuerySet[Run], *, name: str, batch: int | None = None) -> FileResponse:
    """``runs`` as one Inspect AI eval log, downloaded under the name Inspect gives its own logs
    (``inspect_log_filename``: ``inspect view`` lists no other); the page's and the API's download."""
    filename = inspect_log_filename(runs=runs, name=name)
    path = inspect_log_file(runs=runs, name=name, batch=batch)
    handle = open(path, "rb")  # noqa: SIM115 - closed by the response
    path.unlink()  # the open handle keeps the file until the response is sent
    return FileResponse(handle, as_attachment=True, filename=filename, content_type="application/json")


def run_inspect_log_view(request: HttpRequest, pk: int) -> FileResponse:
    """The run as an Inspect AI eval log (``inspect_export``); a run one may not see is a 404 like a missing one."""
    run = runs_visible_to(request.user).filter(pk=pk).first()
    if run is None:
        raise Http404(f"no run {pk}")
    return inspect_log_response(Run.objects.filter(pk=run.pk), name=inspect_log_name(run=run))


def batch_inspect_log_view(request: HttpRequest, pk: int) -> FileResponse:
    """The runs of a batch one may see, one sample each, as an Inspect AI eval log."""
    runs = runs_visible_to(request.user).filter(batch_id=pk)
    if not runs.exists():
        raise Http404(f"no runs in batch {pk}")
    return inspect_log_response(runs, name=inspect_log_name(batch=pk), batch=pk)
