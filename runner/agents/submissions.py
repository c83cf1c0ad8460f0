"""Writes for submissions: a request for runs of an agent (tasks x repeats, models, limits), approved or rejected
by staff. A ``Submission`` holds the decision; its ``Batch`` records what was asked and gets its runs from
``services.batch_create`` when it is approved; a rejected one never gets any."""

from __future__ import annotations

import logging
from dataclasses import replace
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from core.roles import is_staff, is_submitter
from task_bank.models import Task, TaskVersion

from ..jobs import QueueUnreachable
from ..models import Agent, Run, RunLimits, RunSpec, Submission
from ..services import (
    RunRequestError,
    batch_create,
    batch_plan_create,
    batch_record,
    batch_request_check,
)

log = logging.getLogger(__name__)

REASON_MAX = 2000


class SubmissionDecided(RunRequestError):
    """The submission was approved or rejected already."""


def agents_requestable(*, user: AbstractBaseUser):
    """The agents ``user`` may ask runs of: staff any that has code, a submitter their own."""
    agents = Agent.objects.exclude(kind=Agent.Kind.EXTERNAL)
    return agents if is_staff(user) else agents.filter(owner_id=user.pk)


@transaction.atomic
def submission_create(
    *, submitter: AbstractBaseUser, spec: RunSpec, tasks: list[Task], repeats: int = 1
) -> tuple[Submission, list[Run]]:
    """Ask for ``repeats`` runs of ``spec`` on each task. Checked now as the runs would be (tasks that take runs,
    models among the enabled endpoints, limits, at most ``BENCH_MAX_RUNS_PER_REQUEST`` runs); a submitter may ask
    only for their own agents. Staff's request is approved at once, a submitter's waits for staff unless
    ``BENCH_AUTO_APPROVE_SUBMISSIONS``; a request for an agent still waiting for its smoke test waits for it too
    (``submissions_after_smoke``). Returns the submission and its runs (none while it waits)."""
    agent = spec.agent
    if not is_submitter(submitter):
        raise RunRequestError("sign in to ask for runs")
    if not agents_requestable(user=submitter).filter(pk=agent.pk).exists():
        if agent.kind == Agent.Kind.EXTERNAL:
            raise RunRequestError(f"agent {agent} has no code here: it only names the agent of imported runs")
        raise RunRequestError(f"agent {agent.name} is not yours: ask for runs of an agent you uploaded")
    tasks, versions, spec = batch_request_check(spec=spec, tasks=tasks, repeats=repeats)
    if not is_staff(submitter):
        spec = replace(spec, limits=submitter_limits(spec.limits, versions))
    batch = batch_record(spec=spec, tasks=tasks, repeats=repeats, created_by=submitter)
    submission = Submission.objects.create(batch=batch)
    return submission, submission_decide_at_once(submission)


def submitter_limits(limits: RunLimits, versions: list[TaskVersion]) -> RunLimits:
    """A submitter's limits, bounded: steps and time within every task's own, a cost limit of at most
    ``BENCH_SUBMISSION_COST_MOST`` (``BENCH_SUBMISSION_COST_DEFAULT`` when none is named: never no budget).
    RunRequestError names the first that is over."""
    for version in versions:
        for name, own in (("max_steps", version.max_steps), ("max_time_s", version.max_time_s)):
            asked = getattr(limits, name)
            if asked is not None and asked > own:
                raise RunRequestError(
                    f"{name} {asked} is over task {version.task.slug}'s own limit of {own}; ask for at most that"
                )
    most = Decimal(str(settings.BENCH_SUBMISSION_COST_MOST))
    if limits.max_cost is not None and limits.max_cost > most:
        asked, most = f"{limits.max_cost.normalize():f}", f"{most.normalize():f}"
        raise RunRequestError(f"max_cost {asked} is over the most a submitter's run may spend, {most}")
    if limits.max_cost is None:
        limits = replace(limits, max_cost=Decimal(str(settings.BENCH_SUBMISSION_COST_DEFAULT)))
    return limits


def submission_decide_at_once(submission: Submission) -> list[Run]:
    """Approve a new submission where no one need look at it: staff's own, or anyone's with
    ``BENCH_AUTO_APPROVE_SUBMISSIONS``. It waits while its agent waits for its smoke test. Its runs, if approved."""
    asked_by = submission.batch.created_by
    if submission.batch.agent.smoke_state == Agent.Smoke.PENDING:
        return []
    if is_staff(asked_by):
        return submission_approve(submission=submission, by=asked_by)
    if settings.BENCH_AUTO_APPROVE_SUBMISSIONS:
        return submission_approve(submission=submission, by=None)
    return []


def submissions_after_smoke(*, agent: Agent) -> None:
    """Decide the pending submissions of ``agent`` once its smoke test has ended: when it failed, each is rejected
    with the reason; when it passed, those that would have been approved at once are (staff's own, or every one
    with ``BENCH_AUTO_APPROVE_SUBMISSIONS``), the others wait for staff. One that cannot be approved now (a task
    retired since) stays pending, logged."""
    pending = Submission.objects.filter(batch__agent=agent, approval=Submission.Approval.PENDING)
    for submission in pending.select_related("batch__agent", "batch__created_by").order_by("pk"):
        try:
            if agent.smoke_state == Agent.Smoke.FAILED:
                with transaction.atomic():
                    _decide(submission, approval=Submission.Approval.REJECTED, by=None, reason=agent.smoke_refusal)
            else:
                submission_decide_at_once(submission)
        except (RunRequestError, QueueUnreachable) as exc:
            log.warning("submission %s after its agent's smoke test: %s", submission.pk, exc)


def _decide(submission: Submission, *, approval: str, by: AbstractBaseUser | None, reason: str = "") -> None:
    """Move a pending submission to ``approval``: a conditional UPDATE, so two decisions cannot both win."""
    decided = Submission.objects.filter(pk=submission.pk, approval=Submission.Approval.PENDING).update(
        approval=approval, decided_by=by, decided_at=timezone.now(), rejection_reason=reason
    )
    if not decided:
        now = Submission.objects.filter(pk=submission.pk).values_list("approval", flat=True).first()
        raise SubmissionDecided(
            f"submission {submission.pk} is {now or 'gone'}; only a pending submission can be decided"
        )
    submission.refresh_from_db()


@transaction.atomic
def submission_approve(*, submission: Submission, by: AbstractBaseUser | None) -> list[Run]:
    """Approve a pending submission and queue its batch's runs (``services.batch_create``). Checked again as it was
    asked (a task retired or an endpoint disabled since): if the runs cannot be made, RunRequestError says why and
    the submission stays pending. ``by`` None: the auto-approve setting."""
    if by is not None and not is_staff(by):
        raise RunRequestError("only staff approve submissions")
    _decide(submission, approval=Submission.Approval.APPROVED, by=by)
    batch = submission.batch
    if batch.plan:  # a reproduction: its runs exactly as recorded
        return batch_plan_create(batch=batch)
    _, runs = batch_create(
        spec=batch.spec, tasks=list(batch.tasks.order_by("slug")), repeats=batch.repeats, batch=batch
    )
    return runs


@transaction.atomic
def submission_reject(*, submission: Submission, by: AbstractBaseUser, reason: str) -> None:
    """Reject a pending submission, saying why (shown to the submitter); it never gets runs."""
    if not is_staff(by):
        raise RunRequestError("only staff reject submissions")
    reason = reason.strip()
    if not reason:
        raise RunRequestError("say why the submission is rejected (the submitter reads it)")
    if len(reason) > REASON_MAX:
        raise RunRequestError(f"the reason is {len(reason)} characters; at most {REASON_MAX}")
    _decide(submission, approval=Submission.Approval.REJECTED, by=by, reason=reason)
