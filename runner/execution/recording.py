"""Writing what a run did: each step (before the agent sees its observation) and how the run ended.

Every write is fenced by the run's attempt: an attempt that lost the run (the reaper re-queued it, or it was
finished elsewhere) writes nothing over its successor.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime

from django.db import transaction
from django.db.models import F, Sum
from django.db.models.functions import Greatest
from django.utils import timezone

from core.db_clock import db_now
from core.db_retry import connection_lost
from task_bank.models import TaskVersion

from ..actions import ActionOutcome
from ..actions.environment import WRAPPER_ROOM
from ..holds import hold_fields
from ..models import LLMCall, Run, Step
from ..review import tags_auto
from ..sandbox.process import HeadTail
from ..text import db_json, db_text
from ..workspace.snapshots import BlobStore
from .endings import Ending
from .evaluation import EvalResult
from .protocol import AgentChannel
from .validation import validation_record

log = logging.getLogger(__name__)

ENTRY_LIMIT = 20_000
INPUT_LIMIT = 1_000_000


def step_record(
    *,
    run: Run,
    index: int,
    action: str,
    action_input: object,
    entries: object,
    outcome: ActionOutcome,
    snapshot: str,
    started: datetime,
    store: BlobStore,
) -> Step:
    """One step, with the LLM calls made for it and its usage counted to the run, in one transaction."""
    shown, whole = _observation_parts(outcome)
    full = store.put_bytes(whole.encode()) if whole is not None else ""
    with transaction.atomic():
        calls = LLMCall.objects.filter(run=run, step__isnull=True, step_index=index)
        usage = calls.aggregate(tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"), cost=Sum("cost"))
        step = Step.objects.create(
            run=run,
            index=index,
            action=db_text(action[:100]),
            action_input=db_json(_bounded_input(action_input, store)),
            entries=db_json(_clean_entries(entries)),
            observation=db_text(shown),
            observation_blob=full,
            is_error=outcome.error,
            started_at=started,
            duration_s=(timezone.now() - started).total_seconds(),
            snapshot=snapshot,
            low_level=db_json(outcome.low_level),
            detail=db_json(outcome.detail),
            attempt=run.attempt,
            tokens_in=usage["tokens_in"] or 0,
            tokens_out=usage["tokens_out"] or 0,
            cost=usage["cost"] or 0,
        )
        calls.update(step=step)
        Run.objects.filter(pk=run.pk).update(
            steps_count=F("steps_count") + 1,
            live_action="",
            live_output="",
            cpu_seconds=F("cpu_seconds") + float(outcome.detail.get("cpu_seconds", 0)),
            peak_memory_mb=Greatest(F("peak_memory_mb"), float(outcome.detail.get("max_rss_mb", 0))),
        )
    return step


def run_finish(
    *, run_id: int, attempt: int, ending: Ending, result: EvalResult | None, channel: AgentChannel | None
) -> None:
    """Record how the run ended. If that fails, the run is still ended (as an infrastructure failure)
    rather than left live for the reaper to run again. A lost database connection is raised: the session hands the
    run back, and the next attempt ends it again."""
    try:
        _finish(run_id=run_id, attempt=attempt, ending=ending, result=result, channel=channel)
    except Exception as exc:
        if connection_lost(exc):
            raise
        log.exception("run %s: could not record its end", run_id)
        Run.objects.live().filter(pk=run_id, attempt=attempt).update(
            status=Run.Status.FAILED,
            failure_kind=Run.FailureKind.INFRASTRUCTURE,
            error=db_text(f"the run ended ({ending.status}) but recording it failed: {exc}"[:4000]),
            finished_at=timezone.now(),
        )


def _finish(
    *, run_id: int, attempt: int, ending: Ending, result: EvalResult | None, channel: AgentChannel | None
) -> None:
    now = db_now()  # the clock the run's start was written in, whichever worker started it
    run = Run.objects.select_related("task_version").get(pk=run_id)
    fields = {
        "status": ending.status,
        "failure_kind": ending.failure_kind,
        "error": db_text(ending.error),
        "finished_at": now,
        "wall_seconds": max((now - (run.started_at or now)).total_seconds() - run.paused_seconds, 0.0),
        "live_action": "",
        "live_output": "",
    }
    if channel is not None:
        channel.finish()
        fields["stderr_tail"] = db_text(channel.stderr_tail.text())
        fields["cpu_seconds"] = run.cpu_seconds + channel.cpu_seconds
        fields["peak_memory_mb"] = max(run.peak_memory_mb, channel.max_rss_mb)
    if result is not None:
        fields["final_score"] = result.score
        fields["paired_baseline"] = result.paired_baseline
        fields["eval_measurements"] = result.measurements
        if result.error:  # the log says what led to it
            fields["eval_error"] = db_text((result.error + ("\n" + result.log if result.log else ""))[-8000:])
        elif result.score is None:
            fields["eval_error"] = db_text(("evaluation produced no score\n" + result.log)[-8000:])
        else:  # what a scored evaluation printed (its progress) is no error
            fields["eval_log"] = db_text(result.log[-8000:])
    with transaction.atomic():
        # The version is locked before the run ends: ending it changes the ranking generation (a row that every
        # ranking write locks), and a writer that locks the version first (the reaper failing a validation run)
        # must not wait for that row while this one waits for the version.
        version = TaskVersion.objects.select_for_update().get(pk=run.task_version_id)
        updated = Run.objects.live().filter(pk=run.pk, attempt=attempt).update(**fields)
        if not updated:
            log.warning("run %s: finished elsewhere; not overwriting", run.pk)
            return
        if run.purpose == Run.Purpose.VALIDATION:
            validation_record(version, run_id=run.pk)
        if result is not None:
            baseline = result.paired_baseline
            # A validation run measures the baseline: it neither succeeds nor fails (its improvement is the spread).
            succeeded = None
            if run.purpose != Run.Purpose.VALIDATION:
                succeeded = version.succeeded_with(result.score, baseline=baseline)
            Run.objects.filter(pk=run.pk).update(
                improvement=version.improvement_of(result.score, baseline=baseline),
                succeeded=succeeded,
                **({"improved_any_step": True} if succeeded else {}),
                **hold_fields(run, version, result.score),  # beyond the task's ceiling: held for a reviewer
            )
    try:  # what the trace itself shows went wrong, for reviewers and the leaderboard's tag counts
        tags_auto(Run.objects.get(pk=run.pk))
    except Exception:  # the run is recorded; its tags can be written again by manage.py tag_runs
        log.exception("run %s: automatic review tags not written", run.pk)
    log.info("run %s ended %s (score %s)", run.pk, ending.status, result and result.score)


def _clean_entries(entries: object) -> dict:
    if not isinstance(entries, dict):
        return {"(entries)": str(entries)[:ENTRY_LIMIT]}
    return {str(k)[:100]: (v if isinstance(v, str) else str(v))[:ENTRY_LIMIT] for k, v in entries.items()}


#: The most of an observation a step's row holds (its head and tail); the whole of it is then a blob.
OBSERVATION_SHOWN = 20_000


def _observation_parts(outcome: ActionOutcome) -> tuple[str, str | None]:
    """What a step's row shows of its observation, and the whole (None when the row holds it all): what the agent
    was sent, or more when that was cut to the observation limit."""
    sent = outcome.observation
    whole = outcome.full_observation or sent
    if outcome.full_observation is None and len(sent) <= OBSERVATION_SHOWN + WRAPPER_ROOM:
        return sent, None
    keeper = HeadTail(OBSERVATION_SHOWN)
    keeper.write(sent.encode())
    return keeper.text(), whole


#: The key of a step's action input that was too large to keep in its row: the whole of it is the blob "blob".
STORED_INPUT = "(input too large to show)"


def _bounded_input(action_input: object, store: BlobStore) -> object:
    try:
        text = json.dumps(action_input)
    except (TypeError, ValueError):
        return {"(unserialisable input)": repr(action_input)[:ENTRY_LIMIT]}
    if len(text) <= INPUT_LIMIT:
        return action_input
    return {STORED_INPUT: f"{len(text)} bytes", "blob": store.put_bytes(text.encode())}
