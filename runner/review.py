"""Review tags written from the trace itself: the failure modes a run's record shows without anyone reading it
(a script that crashed, memory, a malformed message, a prompt too long, a limit, the same action again and again).
Reviewers add the rest by hand (``ReviewTag.REVIEWED``). ``tags_auto`` is called when a run ends and by
``manage.py tag_runs``; it replaces the run's automatic tags, so calling it again changes nothing."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q

from .actions.catalogue import EXECUTE_SCRIPT, INVALID_MESSAGE, PYTHON_REPL
from .models import LLMCall, ReviewTag, Run, Step

Kind = ReviewTag.Kind
REPEATS = 3  # the same action with the same input this many times in a row is a repeated action
TRACEBACK = "Traceback (most recent call last)"
PROMPT_TOO_LONG = ("context length", "context window", "prompt is too long", "too many tokens", "maximum context")


def _step_kinds(step: Step) -> list[str]:
    kinds = []
    limit = str((step.detail or {}).get("limit", ""))
    if step.action == INVALID_MESSAGE:
        kinds.append(Kind.MALFORMED_RESPONSE)
    if "memory" in limit or (step.is_error and "MemoryError" in step.observation):
        kinds.append(Kind.OUT_OF_MEMORY)
    elif limit:
        kinds.append(Kind.LIMIT_REACHED)
    elif step.action in (EXECUTE_SCRIPT, PYTHON_REPL) and step.is_error and TRACEBACK in step.observation:
        kinds.append(Kind.SCRIPT_CRASHED)
    return kinds


def tags_auto(run: Run) -> list[ReviewTag]:
    """The run's automatic tags, written afresh from its steps, LLM calls and ending."""
    tags: list[ReviewTag] = []
    previous, streak = None, 0
    steps = Step.objects.filter(run=run).only("pk", "action", "action_input", "observation", "is_error", "detail")
    for step in steps.order_by("index").iterator():
        tags += [ReviewTag(run=run, step=step, kind=kind) for kind in _step_kinds(step)]
        same = previous is not None and (step.action, step.action_input) == previous
        streak = streak + 1 if same else 1
        if streak >= REPEATS:
            tags.append(ReviewTag(run=run, step=step, kind=Kind.REPEATED_ACTION))
        previous = (step.action, step.action_input)
    too_long = Q()
    for words in PROMPT_TOO_LONG:
        too_long |= Q(error__icontains=words)
    calls = LLMCall.objects.filter(too_long, run=run).exclude(error="").values_list("step_id", flat=True)
    tags += [ReviewTag(run=run, step_id=step_id, kind=Kind.PROMPT_TOO_LONG) for step_id in set(calls)]
    if run.failure_kind == Run.FailureKind.LIMIT:
        tags.append(ReviewTag(run=run, kind=Kind.LIMIT_REACHED, comment=run.error[:500]))
    with transaction.atomic():
        ReviewTag.objects.filter(run=run, author__isnull=True).delete()
        return ReviewTag.objects.bulk_create(tags)
