"""Runs held for review: a verified trial whose final score is beyond its task's ceiling (``[metric] ceiling`` in
task.toml, the best an honest method reaches) is held when it ends. Rankings count it only once a reviewer (or
staff) cleared it on the review queue (``/runs/held/``); a rejected one is never counted. The held run's page says
why it was held, and, once decided, who decided and what they said."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone

from task_bank.models import TaskVersion

from .models import Run
from .services import RunRequestError

NOTE_MAX = 2000


def hold_fields(run: Run, version: TaskVersion, score: float | None) -> dict:
    """What the row of ``run``, ending with ``score``, gets: held when it is a verified trial beyond the ceiling."""
    if not (run.is_trial and run.origin == Run.Origin.VERIFIED and version.beyond_ceiling(score)):
        return {}
    side = "above" if version.higher_is_better else "below"
    reason = (
        f"its final score {score:g} is {side} the task's ceiling {version.ceiling:g}, the best an honest method "
        "reaches (task.toml: [metric] ceiling); rankings count it once a reviewer clears it"
    )
    return {"review": Run.Review.HELD, "review_reason": reason}


def held_runs() -> QuerySet[Run]:
    """The runs waiting for a reviewer, oldest first."""
    runs = Run.objects.filter(review=Run.Review.HELD).select_related("agent", "task", "task_version")
    return runs.order_by("created_at", "id")


def hold_decide(*, run_id: int, reviewer, clear: bool, note: str) -> bool:
    """Clear (counted from now on) or reject (never counted) a held run; False when it is not held (any more)."""
    note = note.strip()[:NOTE_MAX]
    if not clear and not note:
        raise RunRequestError("say why the run is rejected: its owner reads it")
    decided = Run.Review.CLEARED if clear else Run.Review.REJECTED
    fields = {"review": decided, "review_note": note, "reviewed_by": reviewer, "reviewed_at": timezone.now()}
    return bool(Run.objects.filter(pk=run_id, review=Run.Review.HELD).update(**fields))
