"""What submitters bring and ask for: the agents' pages (the list, an agent's page with its versions, runs and ranked
counts), the agent upload form, the "New runs" form (staff's request queues runs at once, a submitter's is a
submission waiting for approval: one form, two outcomes), the submissions list, and staff's Approve and Reject
buttons. (The runs' pages are ``runner/views/runs.py``; the log upload page ``runner/views/logs.py``.)"""

import io
import zipfile
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from core.roles import is_staff, staff_required
from runner.agents.packages import AgentPackageError, agent_upload
from runner.agents.submissions import (
    REASON_MAX,
    agents_requestable,
    submission_approve,
    submission_create,
    submission_reject,
)
from runner.forms import AgentUploadForm, RunRequestForm, form_throttled
from runner.jobs import QueueUnreachable
from runner.models import Agent, RunSpec, Submission
from runner.selectors import agent_ranked_counts, agent_versions, agents_list, runs_list, submissions_list
from runner.services import RunRequestError
from runner.throttles import AgentUploadThrottle, RunRequestThrottle

AGENT_PAGE_RUNS = 20
SUBMISSIONS_PAGE_DECIDED = 50


def agent_list_view(request: HttpRequest) -> HttpResponse:
    return render(request, "runner/agent_list.html", {"agents": agents_list(viewer=request.user)})


def agent_detail_view(request: HttpRequest, name: str) -> HttpResponse:
    try:
        versions = agent_versions(viewer=request.user, name=name)
    except Agent.DoesNotExist:
        raise Http404(f"no agent {name}") from None
    is_owner = request.user.is_authenticated and versions[0].owner_id == request.user.pk
    versions_context = {
        "versions": versions,
        "smoke_pending": any(agent.smoke_state == Agent.Smoke.PENDING for agent in versions),
        "can_see_smoke_errors": is_owner or is_staff(request.user),
    }
    if request.GET.get("part") == "versions":  # the versions table polls while a smoke test waits
        return render(request, "runner/agent_detail.html#versions", versions_context)
    runs = list(runs_list(viewer=request.user, agent=name)[: AGENT_PAGE_RUNS + 1])  # one more: are there more?
    context = {
        "name": name,
        "latest": versions[0],
        **versions_context,
        "runs": runs[:AGENT_PAGE_RUNS],
        "runs_more": len(runs) > AGENT_PAGE_RUNS,
        "ranked": agent_ranked_counts(viewer=request.user, name=name),
        "is_owner": is_owner,
        **agent_requests(request=request, name=name, latest=versions[0]),
        # What staff approve runs of: the latest version's files, largest first (data an agent brings shows here).
        "package_files": package_files(versions[0]) if is_staff(request.user) else None,
    }
    return render(request, "runner/agent_detail.html", context)


PACKAGE_FILES_SHOWN = 100


def package_files(agent: Agent) -> dict | None:
    """The agent's package files (path, bytes), the largest first, at most PACKAGE_FILES_SHOWN; None for none."""
    if not agent.package_path or not Path(agent.package_path).is_dir():
        return None
    root = Path(agent.package_path)
    files = sorted(
        ((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*") if p.is_file() and not p.is_symlink()),
        key=lambda item: (-item[1], item[0]),
    )
    return {"files": files[:PACKAGE_FILES_SHOWN], "count": len(files), "bytes": sum(size for _, size in files)}


def agent_requests(*, request: HttpRequest, name: str, latest: Agent) -> dict:
    """For the agent's owner and staff: the "Request runs" form and the agent's submissions (None: not shown)."""
    if not (is_staff(request.user) or (request.user.is_authenticated and latest.owner_id == request.user.pk)):
        return {"request_form": None, "submissions": None}
    form = None if latest.kind == Agent.Kind.EXTERNAL else run_request_form(request=request, agent_name=name)
    submissions = submissions_list(viewer=request.user).filter(batch__agent__name=name)[:AGENT_PAGE_RUNS]
    return {"request_form": form, "submissions": list(submissions)}


#: The example agent the upload page offers (``docs/example-agent``): a package as an upload expects it.
EXAMPLE_AGENT = Path(settings.BASE_DIR) / "docs" / "example-agent"


def example_agent_zip_view(request: HttpRequest) -> HttpResponse:
    """The example agent as a zip to upload as it is, or to start from (its folder, ``example-agent/``)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(EXAMPLE_AGENT.iterdir()):
            if path.is_file() and not path.name.endswith(".pyc"):
                archive.write(path, f"example-agent/{path.name}")
    response = HttpResponse(buffer.getvalue(), content_type="application/zip")
    response["Content-Disposition"] = 'attachment; filename="example-agent.zip"'
    return response


@login_required
def agent_upload_view(request: HttpRequest) -> HttpResponse:
    """Upload an agent package: validated as ``import_agent`` does (refused with the reason, nothing kept), stored,
    and smoke-tested by a worker; the agent's page shows the test as it goes."""
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
                    messages.success(request, f"{agent} uploaded: its smoke test waits for a worker (shown below)")
                elif agent.smoke_state == Agent.Smoke.PENDING:
                    messages.info(
                        request, f"these files are already uploaded as {agent}: its smoke test waits for a worker"
                    )
                else:
                    messages.info(request, f"these files are already uploaded as {agent}")
                return redirect(reverse("runner:agent_detail", args=[agent.name]))
    elif request.method == "POST":
        status = 400
    return render(request, "runner/agent_upload.html", {"form": form}, status=status)


def run_request_form(*, request: HttpRequest, data=None, agent_name: str = "") -> RunRequestForm:
    """The form for ``request.user``: the agents they may ask runs of, the one named first."""
    agents = agents_requestable(user=request.user)
    initial = {}
    if agent_name:
        initial["agent"] = agents.filter(name=agent_name).order_by("-created_at").first()
    return RunRequestForm(data, agents=agents, initial=initial)


@login_required
def run_request_view(request: HttpRequest) -> HttpResponse:
    """New runs: staff's are queued at once; anyone else's request is a submission that waits for staff (unless
    BENCH_AUTO_APPROVE_SUBMISSIONS)."""
    form = run_request_form(request=request, data=request.POST or None, agent_name=request.GET.get("agent", ""))
    status = 200
    if request.method == "POST" and form.is_valid():
        if form_throttled(request, form, RunRequestThrottle, "requests for runs"):
            status = 429
        else:
            data = form.cleaned_data
            try:
                spec = RunSpec(data["agent"], data["model"], data["fast_model"], data["edit_model"], form.limits)
                submission, runs = submission_create(
                    submitter=request.user, spec=spec, tasks=list(data["tasks"]), repeats=data["repeats"]
                )
            except RunRequestError as exc:
                form.add_error(None, str(exc))
                status = 400
            except QueueUnreachable as exc:
                messages.warning(request, f"{exc}: the runs stay queued and are sent when the queue is back")
                return redirect("runner:run_list")
            else:
                agent = submission.batch.agent
                if runs and is_staff(request.user):
                    messages.success(request, f"{len(runs)} run(s) of {agent} queued")
                    return redirect(f"{reverse('runner:run_list')}?{urlencode({'agent': agent.name})}")
                if runs:
                    messages.success(request, f"submission {submission.pk} approved at once: {len(runs)} run(s) queued")
                else:
                    messages.success(request, f"submission {submission.pk} sent: it waits for staff to approve it")
                return redirect(reverse("runner:agent_detail", args=[agent.name]))
    elif request.method == "POST":
        status = 400
    return render(request, "runner/run_request.html", {"form": form}, status=status)


@login_required
def submission_list_view(request: HttpRequest) -> HttpResponse:
    """Staff: the submissions waiting for approval, with Approve and Reject, then the latest decided. Anyone else:
    their own submissions and where they are."""
    visible = submissions_list(viewer=request.user)
    context = {
        "pending": list(visible.filter(approval=Submission.Approval.PENDING)),
        "decided": list(visible.exclude(approval=Submission.Approval.PENDING)[:SUBMISSIONS_PAGE_DECIDED]),
        "may_decide": is_staff(request.user),
        "reason_max": REASON_MAX,
    }
    return render(request, "runner/submission_list.html", context)


def _submission(pk: int) -> Submission:
    submission = submissions_list(viewer=None).filter(pk=pk).first()
    if submission is None:
        raise Http404(f"no submission {pk}")
    return submission


@require_POST
@staff_required
def submission_approve_view(request: HttpRequest, pk: int) -> HttpResponse:
    submission = _submission(pk)
    try:
        runs = submission_approve(submission=submission, by=request.user)
    except RunRequestError as exc:
        messages.error(request, f"submission {pk} was not approved: {exc}")
    except QueueUnreachable as exc:
        messages.warning(request, f"submission {pk} approved; {exc}: its runs are sent when the queue is back")
    else:
        messages.success(request, f"submission {pk} approved: {len(runs)} run(s) of {submission.batch.agent} queued")
    return redirect("runner:submission_list")


@require_POST
@staff_required
def submission_reject_view(request: HttpRequest, pk: int) -> HttpResponse:
    submission = _submission(pk)
    try:
        submission_reject(submission=submission, by=request.user, reason=request.POST.get("reason", ""))
    except RunRequestError as exc:
        messages.error(request, f"submission {pk} was not rejected: {exc}")
    else:
        messages.success(request, f"submission {pk} rejected")
    return redirect("runner:submission_list")
