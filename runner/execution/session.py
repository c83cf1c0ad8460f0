"""A run's life on a worker: claim it, prepare the task, lay out the workspace, hand over to the conversation
with the agent, snapshot and evaluate the final workspace, and record the end.

While it lives, the session ticks (``pulse``): it sends heartbeats (the reaper re-queues a run whose heartbeats
stop), notices a cancel request, enforces the wall-time limit and publishes the live output of the running action.
Its workspace is laid out as ``workspaces`` says, and its LLM-backed actions call the model ``action_llm`` picks.
The database is the source of truth: every status change is a conditional UPDATE fenced by the attempt, and a
session that finds it no longer owns its run stops without writing.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import F, QuerySet
from django.db.models.functions import Now
from django.utils import timezone

from core.db_clock import db_now
from core.db_retry import CONNECTION_ERRORS, connection_lost, db_retried
from task_bank.models import TaskVersion

from ..actions import ActionOutcome, Environment
from ..actions.catalogue import FINAL_ANSWER
from ..actions.files import BACKUP_DIR
from ..jobs import QueueUnreachable, run_enqueue
from ..models import Run, Step
from ..sandbox import SandboxError
from ..selectors import storage_refusal
from ..text import db_text
from ..workspace import fs
from ..workspace.fs import WalkLimitError
from ..workspace.mounts import WorkspaceMountError, remove_tree
from ..workspace.snapshots import BlobStore, Manifest
from .action_llm import action_complete
from .conversation import Conversation
from .endings import (
    Ending,
    HandBack,
    LostOwnership,
    RunAborted,
    RunInterrupted,
    infrastructure_failure,
    task_failure,
)
from .evaluation import EvalResult, Rerun, evaluate, evaluate_paired
from .preparation import PreparedTask, TaskPreparationError, task_version_prepare
from .pulse import RunPulse
from .reaper import run_give_up
from .recording import run_finish, step_record
from .sandboxes import get_sandbox
from .validation import task_version_validate_queue
from .workspaces import action_environment, attempt_workspace_lay_out, runs_dir

log = logging.getLogger(__name__)

#: How long a claim waits for queued runs that a writer (not a claimer) holds locked, and how often it looks.
CLAIM_LOCKED_WAIT_S = 5.0
CLAIM_LOCKED_POLL_S = 0.02


def run_claim(run_id: int, *, worker: str = "") -> Run | None:
    """queued -> preparing for this run. None when it is not queued, or another worker claimed it."""
    return _claim_first(Run.objects.filter(pk=run_id, status=Run.Status.QUEUED), worker)


def run_claim_next(*, worker: str = "", queue: str | None = None) -> Run | None:
    """queued -> preparing for the run queued first (``Run.QUEUE_ORDER``) that no other worker is claiming; of
    the kind of work ``queue`` (``Run.Queue``) when given (the queue the worker took the message from)."""
    queued = Run.objects.filter(status=Run.Status.QUEUED)
    if queue is not None:
        queued = queued.filter(queue=queue)
    return _claim_first(queued.order_by(*Run.QUEUE_ORDER), worker)


def _claim_first(queued: QuerySet[Run], worker: str) -> Run | None:
    """Claim the first of ``queued`` that no one holds locked (``SKIP LOCKED``: two workers never wait for each
    other). When every one of them is locked but they are still queued, the holder is not a claimer but a writer
    holding the rows for a moment (``jobs.runs_send`` recording when the runs were sent, right after their
    messages went out; the reaper): wait for it, up to ``CLAIM_LOCKED_WAIT_S``, instead of leaving the message
    that woke this worker with nothing to do and a run with no message until the reaper's resend."""
    deadline = time.monotonic() + CLAIM_LOCKED_WAIT_S
    while True:
        with transaction.atomic():
            run = queued.select_for_update(skip_locked=True).first()
            if run is not None and (claimed := _claim(run, worker)):
                return claimed
        # A plain read waits for no lock: is anything still queued (held by someone), or is it all taken?
        if (run is None and not queued.exists()) or time.monotonic() >= deadline:
            return None
        if run is None:
            time.sleep(CLAIM_LOCKED_POLL_S)


def _claim(run: Run, worker: str) -> Run | None:
    """Take the locked queued run: bump its attempt. A run that had started before (a resumed run) was off a
    worker since its last heartbeat: that time is paused, not counted against its time limit."""
    now = db_now()  # the clock every worker writes heartbeats in
    paused = 0.0
    if run.started_at is not None and run.heartbeat_at is not None:
        paused = max((now - run.heartbeat_at).total_seconds(), 0.0)
    # Conditional as well as locked: a database without row locks (SQLite, the embedded default) still lets
    # only one claimer through.
    claimed = Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED, attempt=run.attempt).update(
        status=Run.Status.PREPARING,
        attempt=F("attempt") + 1,
        worker=worker[:200],
        heartbeat_at=now,
        started_at=run.started_at or now,
        paused_seconds=F("paused_seconds") + paused,
        hand_back_requested_at=None,
        # No model call of an earlier attempt is in flight any more: what a lost attempt had reserved is free.
        tokens_reserved=0,
        cost_reserved=0,
    )
    return Run.objects.select_related("task", "task_version", "agent").get(pk=run.pk) if claimed else None


def run_execute(run_id: int, *, worker: str = "", parent: RunSession | None = None) -> Run | None:
    """Execute a queued run to its end. Returns the finished run, or None if it was not ours to run.

    parent: the run waiting for this one (a benchmark run validating its task first); it keeps beating."""
    run = run_claim(run_id, worker=worker)
    if run is None:
        log.info("run %s is not queued; nothing to do", run_id)
        return None
    RunSession(run, parent=parent).execute()
    return Run.objects.get(pk=run_id)


def run_execute_next(*, worker: str = "", queue: str | None = None) -> Run | None:
    """Execute the run queued first, of the kind ``queue`` when given (what a worker does with an ``execute_run``
    message). None: no such run waits."""
    run = run_claim_next(worker=worker, queue=queue)
    if run is None:
        log.info("no run is queued; nothing to do")
        return None
    RunSession(run).execute()
    return Run.objects.get(pk=run.pk)


@dataclass
class CurrentAction:
    """The action being carried out: a run that has to end in the middle of it still records it."""

    action: str
    action_input: object
    entries: object
    started: datetime = field(default_factory=timezone.now)


class RunSession(RunPulse):
    """One attempt at a run on this worker, from its claim to its end; it ticks as ``RunPulse`` says, and serves
    the conversation its steps (``conversation.Steps``)."""

    def __init__(self, run: Run, *, parent: RunSession | None = None) -> None:
        super().__init__(run, parent=parent)
        self.version: TaskVersion = run.task_version
        self.store = BlobStore()
        self.dir = runs_dir(run)
        # Each attempt has its own folder: an old attempt that finds out late it lost the run removes only its own.
        self.workspace = self.dir / f"workspace-{self.attempt}"
        self.step_index = run.steps_count
        self.current: CurrentAction | None = None
        self.sandbox = None
        self.conversation: Conversation | None = None
        self.environment: Environment | None = None
        self.snapshotter = None
        self.stored_counted = 0  # of self.store.added_bytes, what is charged to the run already
        self.storage_refusal = ""  # why the run may store nothing more (then it takes no more steps)

    # -- the whole run -------------------------------------------------------------------------------------
    def transition(self, source: str, target: str) -> None:
        # The target too: the same write again, when the database took it but a lost connection dropped its answer.
        mine = Run.objects.filter(pk=self.run.pk, status__in=(source, target), attempt=self.attempt)
        fields = {"status": target, "heartbeat_at": Now(), "live_action": "", "live_output": ""}
        if not db_retried(lambda: mine.update(**fields), what=f"run {self.run.pk}"):
            raise LostOwnership()  # (the live fields: what the last stage was doing is not what the next one does)
        self.run.status = target

    def execute(self) -> None:
        """Run the run to its end, whatever stops it: recorded as the run's ending, or handed back to the queue,
        or left unwritten when the run is no longer this attempt's."""
        try:
            self.end()
        except CONNECTION_ERRORS as exc:
            if not connection_lost(exc):
                raise  # the database refused even the end's record: the reaper takes the run
            # Longer than BENCH_DB_RETRY_S, or inside a transaction (a step's, the end's): this attempt ends, and
            # the run goes back to the queue now (once the database answers), to resume after its last step.
            log.warning("run %s: the database connection was lost (%s); handing the run back", self.run.pk, exc)
            self.hand_back(lost=True)
        finally:
            self.release()

    def end(self) -> None:
        """The run's stages, and its ending recorded whatever stopped them (a lost database raises)."""
        try:
            self.stages()
        except LostOwnership:
            log.warning("run %s: no longer ours (attempt %s); stopping without writing", self.run.pk, self.attempt)
        except HandBack:
            self.hand_back()
        except SoftTimeLimitExceeded:
            # The job's time limit (BENCH_RUN_JOB_TIME_LIMIT_S), not the run's: another job resumes it.
            log.warning("run %s: its job reached the job time limit; handing the run back", self.run.pk)
            self.hand_back()
        except RunInterrupted as exc:
            self.finish(exc.ending(self.run), None)
        except TaskPreparationError as exc:
            # prepare.py is the task's own script: its failure is the task's (in the run that validates the task,
            # the version fails validation), never the agent's nor the platform's.
            self.finish(task_failure(str(exc)), None)
        except (SandboxError, WorkspaceMountError) as exc:
            self.finish(infrastructure_failure(str(exc)), None)
        except RunAborted as exc:
            self.finish(exc.ending, None)
        except WalkLimitError as exc:  # a workspace no walk can cover is never half-snapshotted or half-counted
            self.finish(Ending(Run.Status.FAILED, Run.FailureKind.LIMIT, f"the workspace {exc}", evaluate=False), None)
        except Exception as exc:
            if connection_lost(exc):
                raise
            log.exception("run %s crashed", self.run.pk)
            crash = "internal error in the runner:\n" + traceback.format_exc()[-4000:]
            self.finish(infrastructure_failure(crash), None)

    def stages(self) -> None:
        """The run's way when nothing stops it: its task validated first (a benchmark run) and prepared, the
        workspace laid out, the conversation, the evaluation of the final workspace, the end recorded."""
        self.sandbox = get_sandbox(self.run.sandbox or None, run_id=self.run.pk)
        if self.run.purpose == Run.Purpose.BENCHMARK:
            if self.version.status != TaskVersion.Status.READY:
                runs = self.version.validation_repeats
                self.show_live(f"validating the task first: its baseline is run and scored {runs} times")
            with self.time_not_counted():
                self.ensure_validated()
        self.show_live("preparing the task (its prepare.py runs once per task version; its output is below)")
        prepared = task_version_prepare(self.version, sandbox=self.sandbox, tick=self.tick, on_output=self.on_output)
        self.show_live("laying out the workspace")
        self.layout(prepared)
        self.transition(Run.Status.PREPARING, Run.Status.RUNNING)
        self.show_live("")  # waiting for the agent's first action
        ending, manifest = self.converse()
        result = None
        if ending.evaluate:
            self.transition(Run.Status.RUNNING, Run.Status.EVALUATING)
            self.time_limit_end()
            result = self.evaluate(prepared, manifest)
        self.finish(ending, result)

    def release(self) -> None:
        """What the attempt holds on this worker goes: the environment, the agent's channel, the workspace."""
        if self.environment is not None:
            self.environment.close()
        if self.conversation is not None and self.conversation.channel is not None:
            self.conversation.channel.close()
        remove_tree(self.workspace)

    def converse(self) -> tuple[Ending, Manifest]:
        """The conversation with the agent, and the final workspace it left. A run whose conversation ended in an
        earlier attempt (its worker died while evaluating, or right after the Final Answer) is not conversed with
        again: its recorded ending and final workspace are evaluated."""
        ending = self.recorded_ending()
        if ending is not None:
            final_sha = self.run.final_workspace_snapshot()
            log.info("run %s: the conversation ended in an earlier attempt; evaluating only", self.run.pk)
        else:
            self.conversation = Conversation(
                run=self.run,
                version=self.version,
                action_names=self.environment.action_names,
                sandbox=self.sandbox,
                stderr_path=self.dir / f"agent-{self.attempt}.stderr.log",
                steps=self,
            )
            ending = self.conversation.converse()
            self.environment.close()  # nothing may run in the workspace while it is snapshotted and scored
            final_sha, _ = self.snapshotter.take()
            self.storage_count()
        fenced = Run.objects.filter(pk=self.run.pk, attempt=self.attempt)
        if not fenced.update(final_snapshot=final_sha, ending=ending.as_json()):
            raise LostOwnership()
        return ending, self.store.manifest_load(final_sha)

    def recorded_ending(self) -> Ending | None:
        """How an earlier attempt's conversation ended: recorded with the run, or a Final Answer as its last step."""
        if self.run.ending:
            return Ending.from_json(self.run.ending)
        last = Step.objects.filter(run=self.run, inherited=False).order_by("-index").first()
        if last is not None and last.action == FINAL_ANSWER and not last.is_error:
            return Ending(Run.Status.FINISHED)
        return None

    def hand_back(self, *, lost: bool = False) -> None:
        """The run goes back to the queue, first in line (it keeps its place), and is resumed from its last recorded
        step; the action that was running is not recorded (it is done again). A worker that is stopping loses no
        attempt by it; an attempt that lost the database (``lost``) counts as lost, as a dead worker's does, and the
        run fails once ``BENCH_RUN_MAX_ATTEMPTS`` were."""
        mine = Run.objects.on_worker().filter(pk=self.run.pk, attempt=self.attempt)
        fields = {"status": Run.Status.QUEUED, "worker": "", "live_action": "", "live_output": ""}
        fields |= {"heartbeat_at": Now(), "hand_back_requested_at": None, "sent_at": None}
        lost_attempts = self.run.lost_attempts + lost
        if lost:
            fields["lost_attempts"] = lost_attempts
        try:
            if lost and lost_attempts >= settings.BENCH_RUN_MAX_ATTEMPTS:
                db_retried(lambda: run_give_up(mine, self.run, lost=lost_attempts), what=f"run {self.run.pk}")
                return
            back = db_retried(lambda: mine.update(**fields), what=f"run {self.run.pk}")
            # A write the database took but whose answer the lost connection dropped: the run is back already.
            back = back or Run.objects.filter(pk=self.run.pk, attempt=self.attempt, status=Run.Status.QUEUED).exists()
        except CONNECTION_ERRORS as exc:  # the reaper sends it again once its heartbeat is stale
            log.warning("run %s: could not hand the run back (%s)", self.run.pk, exc)
            return
        if not back:
            return
        log.info("run %s: handed back to the queue (attempt %s)", self.run.pk, self.attempt)
        try:
            run_enqueue(self.run)
        except QueueUnreachable as exc:
            log.warning("run %s: %s", self.run.pk, exc)

    def evaluate(self, prepared: PreparedTask, manifest: Manifest) -> EvalResult:
        """The final workspace's score; a timed task's measured paired with its baseline, here and now (a validation
        run measures the baseline itself)."""
        scratch = {"scratch_in": self.dir, "scratch_prefix": f"eval-{self.attempt}-"}
        if not self.version.timed or self.run.purpose == Run.Purpose.VALIDATION:
            return evaluate(prepared, manifest, sandbox=self.sandbox, tick=self.tick, **scratch)
        # A served task times its requests itself; another timed task's starter script is run afresh to be timed.
        rerun = (
            None
            if self.version.serve_script
            else Rerun(
                script=self.version.script_name,
                outputs=tuple(self.version.script_outputs),
                limits=self.environment.limits,
                timeout_s=self.environment.action_timeout_s,
                env=self.environment.sandbox_env(),
                masks=self.environment.code_mounts,
            )
        )
        return evaluate_paired(
            prepared,
            manifest,
            sandbox=self.sandbox,
            rerun=rerun,
            rounds=settings.BENCH_TIMED_ROUNDS,
            tick=self.tick,
            **scratch,
        )

    def ensure_validated(self) -> None:
        """A benchmark run needs a measured baseline: validate the task version first if nobody has."""
        waited_until = time.monotonic() + self.version.max_time_s + settings.BENCH_EVAL_TIMEOUT_S + 600
        rounds_queued = 0
        while True:
            version = TaskVersion.objects.get(pk=self.version.pk)
            self.version = self.run.task_version = version
            if version.status == TaskVersion.Status.READY:
                return
            if version.status == TaskVersion.Status.PENDING and rounds_queued:
                # The round this run started could not run (a worker's failure, not the task's): one round per
                # run, or a broken worker would validate forever.
                raise RunAborted(
                    infrastructure_failure(
                        f"task {version.task.slug} v{version.number} could not be validated: "
                        f"{version.validation_summary}"
                    )
                )
            if version.status == TaskVersion.Status.FAILED:
                raise RunAborted(
                    # Its first line only, as the task page shows it: the rest of the log can quote hidden files.
                    task_failure(
                        f"task {version.task.slug} v{version.number} failed validation: {version.validation_summary}"
                    )
                )
            if version.status == TaskVersion.Status.PENDING:
                # Queued as well as run here: if this worker dies first, another one picks the message up;
                # whoever claims it first runs it, the other finds it taken.
                rounds_queued += 1
                self._validate_here([r.pk for r in task_version_validate_queue(version=version, enqueue=True)], version)
                continue
            if version.status == TaskVersion.Status.VALIDATING and self._validate_queued(version):
                continue
            if time.monotonic() > waited_until:
                raise RunAborted(
                    infrastructure_failure(
                        f"task {version.task.slug} v{version.number} is still validating; gave up waiting"
                    )
                )
            self.tick()
            time.sleep(1.0)

    def _validate_queued(self, version: TaskVersion) -> bool:
        """Run here the version's validation runs that wait in the queue: on a single worker (one stopped during the
        round, which came back to this run first) they would otherwise wait behind this run, which waits for them.
        Whether there were any."""
        waiting = list(
            Run.objects.filter(task_version=version, purpose=Run.Purpose.VALIDATION, status=Run.Status.QUEUED)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        self._validate_here(waiting, version)
        return bool(waiting)

    def _validate_here(self, validation_ids: list[int], version: TaskVersion) -> None:
        """Run these validation runs of ``version`` on this worker, in order; whoever claims a run first has it."""
        for validation_id in validation_ids:
            self.check()  # a worker that is stopping starts no more of them
            log.info("run %s: validating task version %s first (run %s)", self.run.pk, version, validation_id)
            run_execute(validation_id, worker=self.run.worker, parent=self)

    def layout(self, prepared: PreparedTask) -> None:
        """The run's workspace: the latest committed snapshot (or the task's env), read-only data linked; and the
        environment its actions run in."""
        self.snapshotter = attempt_workspace_lay_out(
            run=self.run,
            attempt=self.attempt,
            workspace=self.workspace,
            prepared=prepared,
            store=self.store,
            sandbox=self.sandbox,
        )
        self.environment = action_environment(
            version=self.version,
            prepared=prepared,
            workspace=self.workspace,
            sandbox=self.sandbox,
            on_output=self.on_output,
            tick=self.tick,
            llm=self.action_llm if self.run.model else None,
        )
        if "mlagentbench" in (self.run.agent.config or {}):  # its environment starts every run with backup/
            os.close(fs.open_dir(self.workspace, [BACKUP_DIR], create=True, owner=self.sandbox.ids))

    def action_llm(self, messages: list[dict], purpose: str, options: dict) -> str:
        """Completions for the LLM-backed actions, on the run's fast model (its edit model for the editing
        actions), counted to this run and step."""
        return action_complete(
            run=self.run,
            step_index=self.step_index,
            messages=messages,
            purpose=purpose,
            options=options,
            tick=self.tick,
        )

    # -- acting and recording -------------------------------------------------------------------------------
    def agent_started(self) -> None:
        """The agent's process is coming up: the sandbox the run's scripts share comes up beside it (and while the
        agent makes its first model call), so the first Execute Script does not wait for it. It ends with the
        environment, at the end of the conversation or in ``release``, whether a script ran in it or not."""
        self.environment.kept_sandbox_launch()

    def act(self, message: dict) -> tuple[Step, ActionOutcome]:
        """Carry out an ``act`` message's action and record it as a step."""
        action_input = message.get("input", {})
        self.current = current = CurrentAction(str(message["action"])[:100], action_input, message.get("entries") or {})
        self.write(live_action=db_text(current.action), live_output="")
        if "observation" in message:  # a high-level action the agent's own code carried out
            outcome = self.environment.made(message["action"], action_input, message["observation"])
        else:
            outcome = self.environment.execute(message["action"], action_input)
        step = self.record(current.action, action_input, current.entries, outcome)
        if outcome.final:
            answer = action_input.get("final_answer", "") if isinstance(action_input, dict) else ""
            self.write(final_answer=db_text(str(answer)[:20_000]))
        return step, outcome

    def low(self, message: dict) -> ActionOutcome:
        """Carry out a ``low`` message's low-level action, recorded under the step the agent takes next."""
        return self.environment.low_request(message["action"], message.get("input", {}))

    def record(self, action: str, action_input: object, entries: object, outcome: ActionOutcome) -> Step:
        """Commit the step (with the workspace snapshot after it) before the agent sees the observation."""
        snapshot, _ = self.snapshotter.take(full=self.environment.sandbox_may_have_written())
        step = step_record(
            run=self.run,
            index=self.step_index,
            action=action,
            action_input=action_input,
            entries=entries,
            outcome=outcome,
            snapshot=snapshot,
            started=self.current.started if self.current is not None else timezone.now(),
            store=self.store,
        )
        self.step_index += 1
        self.current = None
        self.live_clear()
        self.storage_count()
        return step

    def storage_count(self) -> None:
        """Charge the run what it added to the blob store since the last count (``Run.stored_bytes``); past its
        storage limit, or its agent's owner's, the conversation ends it at a limit before its next step."""
        added = self.store.added_bytes - self.stored_counted
        if not added:
            return
        self.stored_counted += added
        # Not retried: a write the database took but did not answer would be counted twice.
        runs = Run.objects.filter(pk=self.run.pk, attempt=self.attempt)
        runs.update(stored_bytes=F("stored_bytes") + added)
        stored = runs.values_list("stored_bytes", flat=True).first() or 0
        self.storage_refusal = storage_refusal(owner_id=self.run.agent.owner_id, run_bytes=stored)

    def record_interrupted(self, reason: str) -> str:
        """The action in progress when the run had to end is recorded too, saying why it did not finish; returns its
        name ("" when none was)."""
        current = self.current
        if current is None:
            return ""
        observation = f"EnvError: the run ended while this action was running: {reason}."
        self.record(current.action, current.action_input, current.entries, ActionOutcome(observation, error=True))
        return current.action

    def finish(self, ending: Ending, result: EvalResult | None) -> None:
        channel = self.conversation.channel if self.conversation is not None else None
        run_finish(run_id=self.run.pk, attempt=self.attempt, ending=ending, result=result, channel=channel)
