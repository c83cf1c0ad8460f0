"""What submitters bring: the agents' pages (the list, an agent's page with its versions, runs and ranked counts),
the agent upload form and the log upload form. (Apart from views.py, which holds the runs' pages.)"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from bench.roles import is_staff
from task_bank.models import Task

from .agent_packages import AgentPackageError, agent_upload
from .api import AgentUploadThrottle, TraceUploadThrottle
from .forms import AgentUploadForm, TraceUploadForm, form_throttled
from .imports import TraceImportError, trace_upload
from .models import Agent
from .selectors import agent_ranked_counts, agent_versions, agents_list, runs_list, submissions_list
from .submission_views import run_request_form

AGENT_PAGE_RUNS = 20


def agent_list_view(request: HttpRequest) -> HttpResponse:
    return render(request, "runner/agent_list.html", {"agents": agents_list(viewer=request.user)})


def agent_detail_view(request: HttpRequest, name: str) -> HttpResponse:
    try:
        versions = agent_versions(viewer=request.user, name=name)
    except Agent.DoesNotExist:
        raise Http404(f"no agent {name}") from None
    runs = list(runs_list(viewer=request.user, agent=name)[: AGENT_PAGE_RUNS + 1])  # one more: are there more?
    context = {
        "name": name,
        "latest": versions[0],
        "versions": versions,
        "runs": runs[:AGENT_PAGE_RUNS],
        "runs_more": len(runs) > AGENT_PAGE_RUNS,
        "ranked": agent_ranked_counts(viewer=request.user, name=name),
        "is_owner": request.user.is_authenticated and versions[0].owner_id == request.user.pk,
        **agent_requests(request=request, name=name, latest=versions[0]),
    }
    return render(request, "runner/agent_detail.html", context)


def agent_requests(*, request: HttpRequest, name: str, latest: Agent) -> dict:
    """For the agent's owner and staff: the "Request runs" form and the agent's submissions (None: not shown)."""
    if not (is_staff(request.user) or (request.user.is_authenticated and latest.owner_id == request.user.pk)):
        return {"request_form": None, "submissions": None}
    form = None if latest.kind == Agent.Kind.EXTERNAL else run_request_form(request=request, agent_name=name)
    submissions = submissions_list(viewer=request.user).filter(agent__name=name)[:AGENT_PAGE_RUNS]
    return {"request_form": form, "submissions": list(submissions)}


@login_required
def agent_upload_view(request: HttpRequest) -> HttpResponse:
    """Upload an agent package: validated as ``import_agent`` does and smoke-tested in the sandbox, within the
    request; refused with the reason (nothing kept), or the agent's page."""
    form = AgentUploadForm(request.POST or None, request.FILES or None)
    status = 200
    if request.method == "POST" and form.is_valid():
        if form_throttled(request, form, AgentUploadThrottle, "uploads"):
            status = 429
        else:
            try:
                agent, created = agent_upload(
                    upload=form.cleaned_data["package"],
                    submitter=request.user,
                    visibility=form.cleaned_data["visibility"],
                    description=form.cleaned_data["description"],
                )
            except AgentPackageError as exc:
                form.add_error("package", str(exc))
                status = 400
            else:
                if created:
                    messages.success(request, f"{agent} uploaded: it passed its smoke test")
                else:
                    messages.info(request, f"these files are already uploaded as {agent}")
                return redirect(reverse("runner:agent_detail", args=[agent.name]))
    elif request.method == "POST":
        status = 400
    return render(request, "runner/agent_upload.html", {"form": form}, status=status)


@login_required
def trace_upload_view(request: HttpRequest) -> HttpResponse:
    """Upload an MLAgentBench log: imported as ``import_trace`` does, as a self-reported run under an agent of one's
    own, its final workspace scored by a worker's job; refused with the reason (nothing kept), or the run's page."""
    tasks = list(Task.objects.filter(is_enabled=True).order_by("slug").values_list("slug", "title"))
    form = TraceUploadForm(request.POST or None, request.FILES or None, tasks=tasks)
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
