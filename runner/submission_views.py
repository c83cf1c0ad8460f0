"""The pages that ask for runs and decide on them: the "New run" form (staff's request queues runs at once, a
submitter's is a submission waiting for approval: one form, two outcomes), the submissions list, and staff's
Approve and Reject buttons. (Apart from views.py, the runs' pages, and agent_views.py, the agents'.)"""

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from bench.roles import is_staff

from .api import RunRequestThrottle
from .forms import RunRequestForm, form_throttled
from .jobs import QueueUnreachable
from .models import Batch
from .selectors import submissions_list
from .services import RunRequestError
from .submissions import (
    REASON_MAX,
    agents_requestable,
    submission_approve,
    submission_create,
    submission_reject,
)

SUBMISSIONS_PAGE_DECIDED = 50


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
                batch, runs = submission_create(
                    submitter=request.user,
                    agent=data["agent"],
                    tasks=list(data["tasks"]),
                    repeats=data["repeats"],
                    model=data["model"],
                    fast_model=data["fast_model"],
                    edit_model=data["edit_model"],
                    limits=form.limits,
                )
            except RunRequestError as exc:
                form.add_error(None, str(exc))
                status = 400
            except QueueUnreachable as exc:
                messages.warning(request, f"{exc}: the runs stay queued and are sent when the queue is back")
                return redirect("runner:run_list")
            else:
                agent = batch.agent
                if runs and is_staff(request.user):
                    messages.success(request, f"{len(runs)} run(s) of {agent} queued")
                    return redirect(f"{reverse('runner:run_list')}?{urlencode({'agent': agent.name})}")
                if runs:
                    messages.success(request, f"submission {batch.pk} approved at once: {len(runs)} run(s) queued")
                else:
                    messages.success(request, f"submission {batch.pk} sent: it waits for staff to approve it")
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
        "pending": list(visible.filter(approval=Batch.Approval.PENDING)),
        "decided": list(visible.exclude(approval=Batch.Approval.PENDING)[:SUBMISSIONS_PAGE_DECIDED]),
        "may_decide": is_staff(request.user),
        "reason_max": REASON_MAX,
    }
    return render(request, "runner/submission_list.html", context)


def _submission(pk: int) -> Batch:
    batch = submissions_list(viewer=None).filter(pk=pk).first()
    if batch is None:
        raise Http404(f"no submission {pk}")
    return batch


@require_POST
@staff_member_required
def submission_approve_view(request: HttpRequest, pk: int) -> HttpResponse:
    batch = _submission(pk)
    try:
        runs = submission_approve(batch=batch, by=request.user)
    except RunRequestError as exc:
        messages.error(request, f"submission {pk} was not approved: {exc}")
    except QueueUnreachable as exc:
        messages.warning(request, f"submission {pk} approved; {exc}: its runs are sent when the queue is back")
    else:
        messages.success(request, f"submission {pk} approved: {len(runs)} run(s) of {batch.agent} queued")
    return redirect("runner:submission_list")


@require_POST
@staff_member_required
def submission_reject_view(request: HttpRequest, pk: int) -> HttpResponse:
    batch = _submission(pk)
    try:
        submission_reject(batch=batch, by=request.user, reason=request.POST.get("reason", ""))
    except RunRequestError as exc:
        messages.error(request, f"submission {pk} was not rejected: {exc}")
    else:
        messages.success(request, f"submission {pk} rejected")
    return redirect("runner:submission_list")
