"""Validating a task version: the baseline agent runs the starter script unchanged, several times (a round of
``validation_repeats`` runs in one batch), and the mean of their scores becomes the version's measured baseline.

A version is ready only when every run of its round ended with the starter script exiting 0 and ``eval.py``
returning a measured score, and the scores agree with each other well enough for the task's success threshold
to mean something. Benchmark runs of a version nobody has validated wait for it (``RunSession``).
"""

from __future__ import annotations

import logging
import math
import re
import statistics

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from task_bank.models import TaskVersion

from ..actions import EXECUTE_SCRIPT
from ..agents.builtin import agents_builtin_ensure
from ..jobs import QueueUnreachable
from ..models import Batch, Run, Step, error_summary
from ..services import run_create
from ..text import db_text
from ..workspace.snapshots import BlobStore, manifest_diff

log = logging.getLogger(__name__)

#: eval.py fallbacks (MLAgentBench's vectorization returns 1e10 when the submission failed) are not scores.
FALLBACK_MAGNITUDE = 1e9
#: The noise gate: the baseline runs' relative spread, times this, must not exceed the success threshold.
NOISE_FACTOR = 3


def task_version_validate_queue(
    *, version: TaskVersion, enqueue: bool = True, repeats: int | None = None, demo: bool = False
) -> list[Run]:
    """Queue a validation round (``repeats`` baseline runs, by default the version's; on the demo's queue when
    ``demo``) unless the version is already validating or ready; [] then. Whoever executes a run of the round
    first has it. If the job queue cannot be reached, the round is still returned: its runs stay queued, and the
    reaper sends them later."""
    repeats = repeats or version.validation_repeats
    runs: list[Run] = []
    try:
        with transaction.atomic():
            claimed = TaskVersion.objects.filter(
                pk=version.pk, status__in=[TaskVersion.Status.PENDING, TaskVersion.Status.FAILED]
            ).update(status=TaskVersion.Status.VALIDATING, validation_log="", baseline_scores=[], baseline_spread=None)
            if not claimed:
                return []
            baseline = next(a for a in agents_builtin_ensure() if a.name == "baseline")
            batch = Batch.objects.create(agent=baseline, repeats=repeats, note=f"validation of {version}"[:200])
            runs = [
                run_create(
                    task=version.task,
                    agent=baseline,
                    batch=batch,
                    purpose=Run.Purpose.VALIDATION,
                    version=version,
                    enqueue=enqueue,
                    demo=demo,
                )
                for _ in range(repeats)
            ]
    except QueueUnreachable as exc:  # written and committed, not sent (Run.sent_at says so)
        log.warning("validation of %s: %s", version, exc)
    return runs


def task_version_revalidate(*, version: TaskVersion) -> list[Run]:
    """Staff's "Validate": a new round for the version whatever it measured before (a ready version goes back to
    pending first); [] when a round is under way already."""
    TaskVersion.objects.filter(pk=version.pk, status=TaskVersion.Status.READY).update(status=TaskVersion.Status.PENDING)
    return task_version_validate_queue(version=version)


def fail_validation_if_needed(run: Run) -> None:
    """A validation run that ended without a worker finishing it leaves its task version pending, not stuck."""
    if run.purpose == Run.Purpose.VALIDATION:
        with transaction.atomic():
            version = TaskVersion.objects.select_for_update().get(pk=run.task_version_id)
            validation_record(version, run_id=run.pk)


def validation_record(version: TaskVersion, *, run_id: int) -> None:
    """A run of a validation round has ended (its row says how): settle the version if the round is decided.

    Call it with the version locked (select_for_update), so that the runs of one round settle it one at a time.
    """
    run = Run.objects.get(pk=run_id)
    newest = (
        Run.objects.filter(task_version=version, purpose=Run.Purpose.VALIDATION).order_by("-pk").values("batch_id")
    )[:1]
    if version.status != TaskVersion.Status.VALIDATING or run.batch_id != newest.get()["batch_id"]:
        return  # the round was decided already, or a newer round replaced this one
    round_runs = list(Run.objects.filter(batch_id=run.batch_id, purpose=Run.Purpose.VALIDATION).order_by("pk"))
    if any(r.status == Run.Status.CANCELLED for r in round_runs):
        _round_stop(round_runs)
        _save(version, status=TaskVersion.Status.PENDING, log="validation was cancelled")
        return
    ended_runs = [r for r in round_runs if r.has_ended]
    for ended in (r for r in ended_runs if r.failure_kind != Run.FailureKind.INFRASTRUCTURE):
        problem = _run_problem(ended, version)
        if problem:
            _round_stop(round_runs)
            failed = f"the baseline did not produce a valid score (validation run {ended.pk}): {problem}"
            if _fails_by_design(ended, version):  # the task's own baseline: it replaces the number only
                _fixed_baseline_save(version, also=failed)
                return
            _save(version, status=TaskVersion.Status.FAILED, log=failed)
            return
    for ended in (r for r in ended_runs if r.failure_kind == Run.FailureKind.INFRASTRUCTURE):
        # The worker could not run the baseline (no sandbox, no sized workspace, a worker that died): nothing
        # was learnt about the task, which goes back to waiting for a validation rather than failing it.
        _round_stop(round_runs)
        _save(
            version,
            status=TaskVersion.Status.PENDING,
            log=(
                f"validation run {ended.pk} could not run the baseline, a failure of the worker and not of the task: "
                f"{ended.error}\nThe task is validated again when a run needs it or staff ask for it."
            ),
        )
        return
    done = ended_runs
    if len(done) < len(round_runs):
        version.validation_log = f"{len(done)} of {len(round_runs)} baseline runs done"
        version.save(update_fields=["validation_log"])
        return
    _round_settle(version, done)


def _fails_by_design(run: Run, version: TaskVersion) -> bool:
    """Whether this failed baseline run is what the task declares (``[baseline] starter_fails``): its starter ran
    and failed. A declared baseline replaces only the number: prepare.py, the sandbox and eval.py must still work,
    and a starter that is not declared to fail must not."""
    fixed = version.fixed_baseline
    if fixed is None or not fixed.get("starter_fails"):
        return False
    return Step.objects.filter(run=run, action=EXECUTE_SCRIPT, is_error=True).exists()


def _run_problem(run: Run, version: TaskVersion) -> str:
    """Why this baseline run's score cannot be the baseline ('' when it can)."""
    failed_script = (
        Step.objects.filter(run=run, action=EXECUTE_SCRIPT, is_error=True)
        .order_by("-index")
        .only("observation")
        .first()
    )
    if failed_script is not None:
        output = failed_script.observation
        return (
            f"the starter script {version.script_name} failed: {exception_line(output) or 'it exited with an error'}"
            f"\n\nIts output ends with:\n{output[-4000:]}"
        )
    if run.status != Run.Status.FINISHED:
        error = run.error or f"the baseline run ended {run.status}"
        first = error.partition("\n")[0]
        # The first error on the first line (prepare.py's exception, not "Output:").
        return f"{first} {exception_line(error)}\n{error}" if "\n" in error else error
    if run.final_score is None:
        return f"eval.py produced no score: {run.eval_error or 'no result'}"
    if not math.isfinite(run.final_score) or abs(run.final_score) >= FALLBACK_MAGNITUDE:
        return (
            f"eval.py returned {run.final_score:g}, which looks like a fallback for a failed submission (a measured "
            f"score has a magnitude under {FALLBACK_MAGNITUDE:g}), not a measured score"
        )
    return ""


EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b(: .*)?$")


def exception_line(output: str) -> str:
    """The line of a traceback that names the exception ("ValueError: ..."); else the last line of the output."""
    lines = [line.strip() for line in output.splitlines()]
    named = [line for line in lines if EXCEPTION_LINE.match(line)]
    return (named[-1] if named else error_summary(output))[:500]


def _round_settle(version: TaskVersion, runs: list[Run]) -> None:
    """Every run of the round gave a score: the baseline is their mean, unless they disagree too much."""
    scores = [r.final_score for r in runs]
    mean = statistics.fmean(scores)
    spread = statistics.stdev(scores) / abs(mean) if len(scores) > 1 and mean != 0 else 0.0
    scripts = Step.objects.filter(run__in=runs, action=EXECUTE_SCRIPT).aggregate(total=Sum("duration_s"))["total"]
    walls = statistics.fmean(r.wall_seconds for r in runs)
    version.baseline_scores = scores
    version.baseline_spread = spread
    version.script_outputs = _script_outputs(runs[0])
    version.baseline_time_s = scripts / len(runs) if scripts is not None else walls
    values = ", ".join(f"{s:.6g}" for s in scores)
    measured = (
        f"baseline {version.metric_name} = {mean:.6g}, the mean of {len(scores)} runs ({values}; relative spread "
        f"{spread:.1%})"
    )
    fixed = version.fixed_baseline
    if fixed is not None and fixed["when"] == "always":
        _fixed_baseline_save(version, also=f"measured: {measured}")
        return
    if not version.timed and spread * NOISE_FACTOR > version.success_threshold:
        version.baseline_score = None
        _save(
            version,
            status=TaskVersion.Status.FAILED,
            log=(
                f"{measured}: the baseline is too noisy for the success threshold of {version.success_threshold:.0%} "
                f"(3 × {spread:.1%} > {version.success_threshold:.0%}), so noise would decide success. Raise "
                "metric.success_threshold, make the metric deterministic (fix the seeds and the data split), or, "
                "if the metric is a time or a speed, mark it timed (metric.timed = true) so that scores are measured "
                "paired with the baseline."
            ),
        )
        return
    version.baseline_score = mean
    _save(
        version,
        status=TaskVersion.Status.READY,
        log=(
            f"{measured}; the starter script ran in {version.baseline_time_s:.1f} s on average (a whole validation "
            f"run took {walls:.1f} s)"
        ),
    )


def _fixed_baseline_save(version: TaskVersion, *, also: str) -> None:
    """Ready, with the baseline the task declares (``TaskVersion.fixed_baseline``) and its reason first in the log
    (the line the public sees); ``also``: what the round measured or why it could not."""
    fixed = version.fixed_baseline
    version.baseline_score = fixed["score"]
    declared = f"baseline {version.metric_name} = {fixed['score']:.6g}, declared by the task: {fixed['reason']}"
    _save(version, status=TaskVersion.Status.READY, log=f"{declared}\n{also}")


def _script_outputs(run: Run) -> list[str]:
    """What the starter script wrote: the files its run added or changed in the workspace."""
    if not (run.initial_snapshot and run.final_snapshot):
        return []
    store = BlobStore()
    diff = manifest_diff(store.manifest_load(run.initial_snapshot), store.manifest_load(run.final_snapshot))
    return sorted(diff["added"] + diff["changed"])


def _round_stop(runs: list[Run]) -> None:
    """The round is decided: its runs that have not started yet are not needed."""
    Run.objects.filter(pk__in=[r.pk for r in runs], status=Run.Status.QUEUED).update(
        status=Run.Status.CANCELLED, finished_at=timezone.now(), error="not needed: the validation was decided"
    )


def _save(version: TaskVersion, *, status: str, log: str) -> None:
    version.status = status
    version.validation_log = db_text(log[-8000:])
    if status == TaskVersion.Status.FAILED:
        version.baseline_score = None
    if status != TaskVersion.Status.PENDING:
        version.validated_at = timezone.now()
    version.save(
        update_fields=[
            "status", "baseline_score", "baseline_scores", "baseline_spread", "baseline_time_s", "script_outputs",
            "validated_at", "validation_log",
        ]
    )  # fmt: skip
