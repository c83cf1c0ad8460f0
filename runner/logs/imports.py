"""Runs made elsewhere, brought in: an MLAgentBench log folder (or its zip) becomes a self-reported run.

The log is MLAgentBench's (``exports`` describes the layout): ``env_log/trace.json`` with the steps in order,
``env_log/traces/step_<N>_files/`` (the workspace after step N, without the task's read-only files),
``step_final_files/``, ``overall_time.txt`` and ``error.txt``; a log this platform exported also carries
``mlab_bench.json``. The run gets every step in order (action, input, observation, when it ended, its low-level
steps), the workspace after each step (the step's files over the task's read-only ones, stored as blobs once
each), and the final workspace scored here with the task version's eval in the sandbox, as our own runs are:
at once by ``import_log``, by a worker's job for an upload (``import_score``: a timed task's paired scoring takes
minutes, longer than a web request should), the run waiting for it meanwhile (``Run.score_pending_since``).
Its steps are as the log says: the run is marked self-reported (``Run.Origin.SELF_REPORTED``) and rankings leave it
out unless asked.

Everything is read and checked before anything is written; a bad log gets one ``LogImportError`` naming what
is wrong, and no run.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from task_bank.archive import PackageLimits, extracted, upload_saved
from task_bank.models import Task, TaskVersion
from task_bank.package import TaskPackageError, is_read_only, iter_files

from ..execution.evaluation import EvalResult, evaluate
from ..execution.preparation import PreparedTask, TaskPreparationError, task_version_prepare
from ..execution.sandboxes import get_sandbox
from ..jobs import import_score_enqueue
from ..models import Agent, Run, Step
from ..review import tags_auto
from ..selectors import storage_refusal
from ..text import db_json, db_text
from ..workspace.snapshots import BlobStore, Manifest
from .exports import OVERALL_TIME
from .inspect_read import inspect_log_read, inspect_model
from .read import (
    ERROR_LIMIT,
    ERROR_OBSERVATIONS,
    EXPECTED,
    LATEST_TIMESTAMP,
    Log,
    LoggedStep,
    LogImportError,
    log_number,
    log_read,
)

AGENT_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,99}$")
DEFAULT_AGENT = "mlagentbench-log"

log = logging.getLogger(__name__)


# -- what the run is of --------------------------------------------------------------------------------------------


def _task_version(log: Log, task_slug: str | None) -> TaskVersion:
    """The task version the log's run is of: ``task_slug`` (or the one the log names), else the task whose current
    version has the log's research problem."""
    slug = task_slug or log.extras.get("task")
    tasks = Task.objects.select_related("current_version")
    if slug:
        task = tasks.filter(slug=slug).first()
        if task is None:
            known = ", ".join(tasks.order_by("slug").values_list("slug", flat=True)) or "none"
            raise LogImportError(f"no task {slug!r} in the bank; tasks: {known}")
    else:
        problem = log.task_description.strip()
        matching = [
            t for t in tasks.exclude(current_version=None) if t.current_version.research_problem.strip() == problem
        ]
        if len(matching) != 1:
            raise LogImportError(
                "the log's research problem is not that of exactly one task in the bank: name the task (--task SLUG)"
            )
        task = matching[0]
    if task.current_version is None:
        raise LogImportError(f"task {task.slug} has no files yet; import its package first")
    number = log.extras.get("task_version") if not task_slug or task_slug == log.extras.get("task") else None
    if isinstance(number, int) and number != task.current_version.number:
        version = task.versions.filter(number=number).first()
        if version is not None:
            return version
    return task.current_version


def upload_default_agent(owner: AbstractBaseUser) -> str:
    """The agent an upload of ``owner``'s is filed under when neither they nor the log name one: for a submitter a
    name of their own (``DEFAULT_AGENT`` is one agent, the first uploader's, which nobody else may file runs
    under); staff's, who may file under any agent, ``DEFAULT_AGENT``."""
    if owner.is_staff:
        return DEFAULT_AGENT
    user = re.sub(r"[^a-z0-9_-]+", "-", str(owner.get_username()).lower()).strip("-_") or "user"
    return f"{user[:80]}-{DEFAULT_AGENT}"


def _agent_spec(log: Log, agent_name: str | None, default: str = DEFAULT_AGENT) -> tuple[str, str | None]:
    """The agent's name and version (None: its newest, or "1" for a new one)."""
    if agent_name:
        name, _, version = agent_name.partition("@")
    else:
        name, version = log.extras.get("agent") or default, log.extras.get("agent_version")
    if not isinstance(name, str) or not AGENT_NAME_RE.match(name):
        raise LogImportError(f"agent name {name!r}: use lowercase letters, digits, '-' and '_'")
    return name, (str(version)[:40] if version else None)


def _agent_check(name: str, version: str | None, owner: AbstractBaseUser | None, *, only_own: bool) -> None:
    """Who may file a run under which agent. With ``only_own``, every version of the name must be ``owner``'s (a
    name is one agent: a new version under someone else's name would become that agent's newest, shown as theirs
    and run in their place). A version the platform does not have is made only for an agent made by imports: an
    agent with code here gets its versions from uploads, never from a log."""
    versions = Agent.objects.filter(name=name)
    if only_own and (versions.exclude(owner=owner).exists() if owner is not None else versions.exists()):
        raise LogImportError(
            f"agent {name!r} is not yours: runs can be imported under an agent you own or a new name (name it as "
            "the agent to file the run under)"
        )
    if (
        version
        and not versions.filter(version=version).exists()
        and versions.exclude(kind=Agent.Kind.EXTERNAL).exists()
    ):
        known = ", ".join(versions.order_by("created_at").values_list("version", flat=True))
        raise LogImportError(
            f"agent {name!r} has no version {version!r} (its versions: {known}); a log's run is filed under a version "
            "it has, or under a new name: only an agent made by imports gets new versions from a log"
        )


def _agent(name: str, version: str | None, owner: AbstractBaseUser | None) -> Agent:
    """The agent of that name (and version, else its newest), or a new external one: it has no code here."""
    agents = Agent.objects.filter(name=name, **({"version": version} if version else {}))
    agent = agents.order_by("-created_at").first()
    if agent is not None:
        return agent
    agent, _ = Agent.objects.get_or_create(
        name=name,
        version=version or "1",
        defaults={
            "kind": Agent.Kind.EXTERNAL,
            "entrypoint": "",
            "description": "Named by runs imported from logs made elsewhere; it has no code here.",
            "owner": owner,
        },
    )
    return agent


# -- snapshots and the score ---------------------------------------------------------------------------------------


def _folder_manifest(folder: Path, base: Manifest, store: BlobStore) -> Manifest:
    """A step's files over ``base`` (the task's read-only files), each stored once. A read-only file stays the
    task's whatever the log holds under its name: no run of ours can change one either."""
    manifest = dict(base)
    try:
        for rel, path in iter_files(folder):
            if rel in base:
                continue
            sha, size = store.put_file(path)
            manifest[rel] = [sha, size]
    except TaskPackageError as exc:
        raise LogImportError(f"{folder.name}/{exc}") from None
    return manifest


def _snapshots_store(
    log: Log, prepared: PreparedTask, version: TaskVersion, store: BlobStore
) -> tuple[list[str], str, Manifest]:
    """The workspace after each step, stored as a run stores it (what differs from the task's manifest): each
    step's snapshot (a step without its folder in the log keeps the one before), the final one and its manifest."""
    read_only = {p: entry for p, entry in prepared.env_manifest.items() if is_read_only(p, version.read_only_patterns)}
    snapshots, last, manifest = [], prepared.env_manifest_sha, prepared.env_manifest
    for index in range(len(log.steps)):
        if index in log.step_dirs:
            last, manifest = _snapshot_store(log.step_dirs[index], prepared, read_only, store)
        snapshots.append(last)
    if log.final_dir is not None:
        last, manifest = _snapshot_store(log.final_dir, prepared, read_only, store)
    return snapshots, last, manifest


def _snapshot_store(
    folder: Path, prepared: PreparedTask, read_only: Manifest, store: BlobStore
) -> tuple[str, Manifest]:
    """One step's folder stored as a snapshot: its sha and its manifest."""
    manifest = _folder_manifest(folder, read_only, store)
    return store.manifest_save(manifest, base_sha=prepared.env_manifest_sha, base=prepared.env_manifest), manifest


#: Why an imported run of a task whose score runs the workspace's code has no score.
NOT_RUN = (
    "not scored: this task's score is measured by running the workspace's code, and code from an uploaded log is "
    "never run; submit the agent to have its runs executed and scored here"
)


def _score(prepared: PreparedTask, manifest: Manifest) -> EvalResult:
    """The final workspace's score with the task version's eval, on its files as data, in the sandbox. A timed or
    served task's score needs the workspace's code run: an uploaded log's is not, and the run has no score."""
    version = prepared.version
    if version.timed or version.serve_script:
        return EvalResult(None, NOT_RUN, "", 0)
    return evaluate(prepared, manifest, sandbox=get_sandbox(), scratch_prefix="eval-import-")


def _ending(log: Log) -> dict:
    """The status, failure kind and error: as this platform recorded them when it exported the log, else as
    MLAgentBench's tables read a log (an error.txt, or no overall_time.txt, leaves the run out: an infrastructure
    failure here)."""
    status = log.extras.get("status")
    if status in Run.ENDED:
        kind = log.extras.get("failure_kind") or ""
        return {
            "status": status,
            "failure_kind": kind if kind in Run.FailureKind.values else "",
            "error": db_text(str(log.extras.get("error") or ""))[:ERROR_LIMIT],
        }
    if log.error is not None:
        return {
            "status": Run.Status.FAILED,
            "failure_kind": Run.FailureKind.INFRASTRUCTURE,
            "error": db_text(log.error),
        }
    if log.overall_time is None:
        return {
            "status": Run.Status.FAILED,
            "failure_kind": Run.FailureKind.INFRASTRUCTURE,
            "error": f"the log has no {OVERALL_TIME}: the run did not end",
        }
    return {"status": Run.Status.FINISHED, "failure_kind": "", "error": ""}


# -- the import ----------------------------------------------------------------------------------------------------


def log_import(
    *,
    source: Path,
    task_slug: str | None = None,
    agent_name: str | None = None,
    model: str | None = None,
    owner: AbstractBaseUser | None = None,
    only_own_agents: bool = False,
    score_later: bool = False,
    ready_only: bool = False,
    default_agent: str = DEFAULT_AGENT,
) -> Run:
    """Import an MLAgentBench log folder or zip as a self-reported run of ``task_slug`` (else the task the log
    names or whose research problem it has) by ``agent_name`` ("name" or "name@version"; else the one the log
    names, else ``default_agent``; an agent not here yet is made, with no code, owned by ``owner``). With
    ``only_own_agents`` (an upload by someone who is not staff) the agent must be ``owner``'s or a new one: nobody
    files runs under another's agent. With ``ready_only`` (an upload) the task version must be ready: validated, so
    prepared already (its preparation, prepare.py, is not run within a web request) and with a baseline to measure
    the run against. The final workspace is scored here, or with ``score_later`` by a worker's job
    (``import_score``) once the run is recorded. ``LogImportError`` on a bad log, and nothing written."""
    try:
        with extracted(Path(source), expected=EXPECTED, limits=PackageLimits.for_logs()) as root:
            log = log_read(root)
            version = _task_version(log, task_slug)
            if ready_only and version.status != TaskVersion.Status.READY:
                raise LogImportError(
                    f"task {version} is {version.get_status_display().lower()}: logs can be uploaded for a task "
                    "version once it is ready (validated, its baseline measured)"
                )
            name, agent_version = _agent_spec(log, agent_name, default_agent)
            _agent_check(name, agent_version, owner, only_own=only_own_agents)
            try:
                prepared = task_version_prepare(version)
            except TaskPreparationError as exc:
                raise LogImportError(f"task {version} could not be prepared to score the run: {exc}") from exc
            store = BlobStore()
            snapshots, last, final_manifest = _snapshots_store(log, prepared, version, store)
    except TaskPackageError as exc:
        raise LogImportError(str(exc)) from exc
    owner_id = owner.pk if owner is not None else None
    if refusal := storage_refusal(owner_id=owner_id, adding=store.added_bytes):  # the blobs go with the collector
        raise LogImportError(f"the log cannot be stored: {refusal}")
    result = None if score_later else _score(prepared, final_manifest)
    return _run_record(
        log=log,
        version=version,
        agent_spec=(name, agent_version),
        model=model if model is not None else str(log.extras.get("model") or ""),
        owner=owner,
        snapshots=snapshots,
        initial=prepared.env_manifest_sha,
        final=last,
        result=result,
        stored_bytes=store.added_bytes,
    )


def log_upload(
    *,
    upload: UploadedFile,
    owner: AbstractBaseUser,
    task_slug: str | None = None,
    agent_name: str | None = None,
    model: str | None = None,
) -> Run:
    """An uploaded log's zip (the API's and the site's upload) imported as ``log_import`` imports a path:
    at most ``BENCH_TASK_MAX_BYTES``, of a ready task version, under an agent of ``owner``'s unless they are staff,
    its final workspace scored by a worker's job. ``LogImportError`` on a bad upload, and nothing written (the
    upload's copy is removed whatever happens)."""
    return _upload_import(
        upload,
        owner,
        log_import,
        prefix="log-upload-",
        task_slug=task_slug,
        agent_name=agent_name,
        model=model,
        score_later=True,
    )


def _upload_import(upload: UploadedFile, owner: AbstractBaseUser, importer, *, prefix: str, **fields):
    """``importer`` (``log_import``, ``inspect_import``) on an upload, with the rules of every upload: at most
    ``BENCH_TASK_MAX_BYTES``, of ready task versions, under agents of ``owner``'s unless they are staff; the
    upload's copy (under its own name) removed whatever happens."""
    if upload.size > settings.BENCH_TASK_MAX_BYTES:
        raise LogImportError(
            f"the upload is {upload.size} bytes; at most {settings.BENCH_TASK_MAX_BYTES} bytes are allowed"
        )
    with upload_saved(upload, prefix=prefix, keep_name=True) as path:
        return importer(
            source=path,
            owner=owner,
            only_own_agents=not owner.is_staff,
            ready_only=True,
            default_agent=upload_default_agent(owner),
            **fields,
        )


def inspect_upload(
    *,
    upload: UploadedFile,
    owner: AbstractBaseUser,
    task_slug: str | None = None,
    agent_name: str | None = None,
    model: str | None = None,
) -> list[Run]:
    """An uploaded Inspect AI log (``.json`` or ``.eval``; the API's and the site's upload) imported as
    ``inspect_import`` imports a path, a run per sample, with ``log_upload``'s rules: at most
    ``BENCH_TASK_MAX_BYTES``, of ready task versions, under agents of ``owner``'s unless they are staff.
    ``LogImportError`` on a bad upload, and nothing written."""
    return _upload_import(
        upload, owner, inspect_import, prefix="inspect-upload-", task_slug=task_slug, agent_name=agent_name, model=model
    )


#: Why a run imported from an Inspect log has no score.
NO_FILES = (
    "not scored: an Inspect AI log holds no workspace files, and a run is scored here from its final files; submit "
    "the agent to have its runs executed and scored here"
)


def _reported(log: Log) -> str:
    """What the log itself said the score was, kept in the reason the run has none (never as its score)."""
    reported = log.extras.get("final_score")
    return f" (the log reports a score of {reported:.6g})" if isinstance(reported, int | float) else ""


def _inspect_task_version(log: Log, task_slug: str | None) -> TaskVersion:
    """``_task_version`` for a sample: a task the log names but the bank does not have is looked for by the
    sample's research problem, and failing that the error names both."""
    named = log.extras.get("task")
    if task_slug or not named or Task.objects.filter(slug=str(named)).exists():
        return _task_version(log, task_slug)
    log.extras = {**log.extras, "task": None}
    try:
        return _task_version(log, None)
    except LogImportError:
        known = ", ".join(Task.objects.order_by("slug").values_list("slug", flat=True)) or "none"
        raise LogImportError(
            f"the log's task {str(named)[:100]!r} is not in the bank and its research problem is not that of exactly "
            f"one task: name the task (--task SLUG); tasks: {known}"
        ) from None


def inspect_import(
    *,
    source: Path,
    task_slug: str | None = None,
    agent_name: str | None = None,
    model: str | None = None,
    owner: AbstractBaseUser | None = None,
    only_own_agents: bool = False,
    ready_only: bool = False,
    default_agent: str = DEFAULT_AGENT,
) -> list[Run]:
    """Import an Inspect AI eval log (``.json``; ``inspect_read``) as self-reported runs, one per sample, as
    ``log_import`` imports an MLAgentBench log: the task ``task_slug``, else the one the sample's run record or
    the log names, else the one whose research problem the sample has; the agent ``agent_name``, else the one the
    record names, else ``default_agent``; the same checks of who files runs under which agent and of a ready task.
    An Inspect log holds no workspace files, so the runs are not scored here (``NO_FILES``) and their steps have no
    snapshots. Every sample is checked before anything is written, and all the runs are written in one
    transaction: ``LogImportError`` on a bad log, and nothing written."""
    source = Path(source)
    if not source.is_file():
        raise LogImportError(f"{source} does not exist or is not a file")
    header, logs = inspect_log_read(source)
    planned = []
    for log_ in logs:
        version = _inspect_task_version(log_, task_slug)
        if ready_only and version.status != TaskVersion.Status.READY:
            raise LogImportError(
                f"task {version} is {version.get_status_display().lower()}: logs can be uploaded for a task "
                "version once it is ready (validated, its baseline measured)"
            )
        name, agent_version = _agent_spec(log_, agent_name, default_agent)
        _agent_check(name, agent_version, owner, only_own=only_own_agents)
        planned.append((log_, version, (name, agent_version)))
    prepared = {}
    for _, version, _ in planned:
        if version.pk not in prepared:
            try:
                prepared[version.pk] = task_version_prepare(version)
            except TaskPreparationError as exc:
                raise LogImportError(f"task {version} could not be prepared: {exc}") from exc
    if refusal := storage_refusal(owner_id=owner.pk if owner is not None else None, adding=0):
        raise LogImportError(f"the log cannot be stored: {refusal}")
    with transaction.atomic():
        return [
            _run_record(
                log=log_,
                version=version,
                agent_spec=agent_spec,
                model=model if model is not None else str(log_.extras.get("model") or inspect_model(header)),
                owner=owner,
                snapshots=[""] * len(log_.steps),
                initial=prepared[version.pk].env_manifest_sha,
                final="",
                result=EvalResult(None, NO_FILES + _reported(log_), "", 0),
            )
            for log_, version, agent_spec in planned
        ]


def _final_answer(step: LoggedStep | None) -> str:
    """What the agent submitted, as our runs record it: the Final Answer's ``final_answer``."""
    if step is None:
        return ""
    answer = step.args.get("final_answer", "") if isinstance(step.args, dict) else step.args
    return str(answer)[:20_000]


def _when(timestamp: float) -> datetime:
    return datetime.fromtimestamp(min(timestamp, LATEST_TIMESTAMP), tz=UTC)


@transaction.atomic
def _run_record(
    *,
    log: Log,
    version: TaskVersion,
    agent_spec: tuple[str, str | None],
    model: str,
    owner: AbstractBaseUser | None,
    snapshots: list[str],
    initial: str,
    final: str,
    result: EvalResult | None,
    stored_bytes: int = 0,
) -> Run:
    """The run and its steps, in one transaction; with no ``result`` the run waits for its score, and the job that
    scores it is sent once the transaction commits. ``stored_bytes``: what its snapshots added to the blob store."""
    timing = {s.get("index"): s for s in log.extras.get("steps", []) if isinstance(s, dict)}
    usage = log.extras.get("usage") if isinstance(log.extras.get("usage"), dict) else {}
    start, times = _run_times(log, timing, usage)
    final_answer = next((s for s in reversed(log.steps) if s.action == "Final Answer"), None)
    scored = _score_fields(version, result) if result is not None else {"score_pending_since": timezone.now()}
    run = Run.objects.create(
        task=version.task,
        task_version=version,
        agent=_agent(*agent_spec, owner),
        model=model[:200],
        origin=Run.Origin.SELF_REPORTED,
        purpose=Run.Purpose.BENCHMARK,
        queue=Run.queue_for(version=version),
        max_steps=max(version.max_steps, len(log.steps)),
        max_time_s=version.max_time_s,
        attempt=1,
        steps_count=len(log.steps),
        final_answer=db_text(_final_answer(final_answer) or str(log.extras.get("answer") or "")),
        initial_snapshot=initial,
        final_snapshot=final,
        stored_bytes=stored_bytes,
        cpu_seconds=log_number(usage.get("cpu_seconds")) or 0,
        peak_memory_mb=log_number(usage.get("peak_memory_mb")) or 0,
        **_counts(usage),
        **times,
        **scored,
        **_ending(log),
    )
    Step.objects.bulk_create(_steps(run, log, snapshots=snapshots, timing=timing, start=start))
    tags_auto(run)
    if result is None:
        import_score_enqueue(run.pk)
    return run


def _run_times(log: Log, timing: dict, usage: dict) -> tuple[float | None, dict]:
    """When the run started (None for a log with no steps), and the run's fields of time: its start as this
    platform recorded it, else its wall time before its last step ended, else when its first step ended."""
    wall = log.overall_time if log.overall_time is not None else log_number(usage.get("wall_seconds"))
    if not log.steps:  # an Inspect sample without a tool call: the sample's own times, when it has them
        began, ended = log_number(log.extras.get("started_at")), log_number(log.extras.get("completed_at"))
        if began is None:
            return None, {"started_at": None, "finished_at": None, "wall_seconds": wall or 0}
        ended = ended if ended is not None else began + (wall or 0)
        return began, {"started_at": _when(began), "finished_at": _when(ended), "wall_seconds": wall or 0}
    first, last = log.steps[0].timestamp, log.steps[-1].timestamp
    recorded = log_number(timing.get(0, {}).get("started_at"))
    start = recorded if recorded is not None else (last - wall if wall is not None else first)
    return start, {
        "started_at": _when(start),
        "finished_at": _when(max(last, start + (wall or 0))),
        "wall_seconds": wall or 0,
    }


def _steps(run: Run, log: Log, *, snapshots: list[str], timing: dict, start: float | None) -> list[Step]:
    """The run's steps as the log has them, each started when this platform recorded it, else when the step before
    it ended (the first: when the run started)."""
    steps, previous = [], start
    for index, (logged, snapshot) in enumerate(zip(log.steps, snapshots, strict=True)):
        recorded = timing.get(index, {})
        began = log_number(recorded.get("started_at"))
        began = began if began is not None else previous
        steps.append(
            Step(
                run=run,
                index=index,
                action=db_text(logged.action),
                action_input=db_json(logged.args),
                entries=db_json(logged.entries),
                observation=db_text(logged.observation),
                is_error=bool(recorded.get("is_error", logged.observation.startswith(ERROR_OBSERVATIONS))),
                started_at=_when(began),
                duration_s=max(logged.timestamp - began, 0.0),
                snapshot=snapshot,
                low_level=db_json(logged.low_level),
                **_counts(recorded),
            )
        )
        previous = logged.timestamp
    return steps


def _counts(recorded: dict) -> dict:
    """Tokens and cost as the log recorded them, for the run or one step (0 for what it did not record)."""
    return {
        "tokens_in": int(log_number(recorded.get("tokens_in")) or 0),
        "tokens_out": int(log_number(recorded.get("tokens_out")) or 0),
        "cost": log_number(recorded.get("cost")) or 0,
    }


def _score_fields(version: TaskVersion, result: EvalResult) -> dict:
    """A run's fields that its final score sets."""
    baseline = result.paired_baseline
    return {
        "final_score": result.score,
        "paired_baseline": baseline,
        "eval_measurements": result.measurements,
        "eval_error": db_text((result.error + ("\n" + result.log if result.log else ""))[-ERROR_LIMIT:])
        if result.score is None
        else "",
        "improvement": version.improvement_of(result.score, baseline=baseline),
        "succeeded": version.succeeded_with(result.score, baseline=baseline),
    }


def import_score(run_id: int) -> Run | None:
    """Score an imported run that waits for its score (``Run.score_pending_since``): its final workspace with the
    task version's eval in the sandbox, as ``log_import`` scores one at once. The job an upload sends, and
    the reaper sends again when it is lost. A scoring that cannot be done (the task no longer prepares, the job's
    time limit) is recorded as the run's evaluation error: the run then has no score, as a run of ours whose eval
    failed. None when the run is gone; a run already scored is left as it is."""
    run = Run.objects.select_related("task_version").filter(pk=run_id).first()
    if run is None or run.score_pending_since is None:
        return run
    version = run.task_version
    try:
        result = _score(task_version_prepare(version), BlobStore().manifest_load(run.final_snapshot))
    except TaskPreparationError as exc:
        result = EvalResult(
            score=None, error=f"task {version} could not be prepared to score the run: {exc}", log="", duration_s=0
        )
    except Exception as exc:  # the job's soft time limit among them: the run must not wait for ever
        log.exception("imported run %s could not be scored", run_id)
        result = EvalResult(
            score=None, error=f"the run could not be scored: {type(exc).__name__}: {exc}", log="", duration_s=0
        )
    Run.objects.filter(pk=run_id, score_pending_since__isnull=False).update(
        score_pending_since=None, **_score_fields(version, result)
    )
    run.refresh_from_db()
    return run
