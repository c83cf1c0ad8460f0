"""Executing a run: claim it, prepare the task, converse with the agent, record every step, evaluate, finish.

The database is the source of truth. Every status change is a conditional UPDATE; a worker that finds it no
longer owns a run (a reaper re-queued it, an admin cancelled it) stops without writing.
"""

from __future__ import annotations

import logging
import subprocess
import time
import traceback
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import F, Sum
from django.db.models.functions import Greatest
from django.utils import timezone

from task_bank.models import TaskVersion

from .actions import ActionOutcome, EnvError, Environment, catalogue_for_agent
from .agents import AGENTS_DIR
from .evaluation import EvalResult, evaluate
from .llm import LLMError, complete
from .models import LLMCall, Run, Step
from .preparation import PreparedTask, TaskPreparationError, task_version_prepare
from .protocol import AgentChannel, AgentExited, BadMessage
from .sandbox import Limits, Mount, SandboxError, get_sandbox, sandbox_python
from .sandbox.process import HeadTail, Interrupted
from .snapshots import BlobStore, remove_tree, workspace_restore
from .text import db_json, db_text

log = logging.getLogger(__name__)

MAX_BAD_MESSAGES = 10
ENTRY_LIMIT = 20_000
INPUT_LIMIT = 1_000_000
FINAL_ANSWER_GRACE_S = 10.0


class LostOwnership(Exception):
    """Another worker or a cancel owns the run now; stop without writing."""


@dataclass
class Ending:
    status: str
    failure_kind: str = ""
    error: str = ""
    evaluate: bool = True


def run_claim(run_id: int, *, worker: str = "") -> Run | None:
    """queued -> preparing, as one conditional UPDATE. None when someone else has it (idempotence)."""
    now = timezone.now()
    claimed = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
        status=Run.Status.PREPARING,
        attempt=F("attempt") + 1,
        worker=worker[:200],
        heartbeat_at=now,
    )
    if not claimed:
        return None
    run = Run.objects.select_related("task", "task_version", "agent").get(pk=run_id)
    if run.started_at is None:
        run.started_at = now
        Run.objects.filter(pk=run_id).update(started_at=now)
    return run


def run_execute(run_id: int, *, worker: str = "", parent: RunSession | None = None) -> Run | None:
    """Execute a queued run to its end. Returns the finished run, or None if it was not ours to run.

    parent: the run waiting for this one (a benchmark run validating its task first); it keeps beating."""
    run = run_claim(run_id, worker=worker)
    if run is None:
        log.info("run %s is not queued; nothing to do", run_id)
        return None
    RunSession(run, parent=parent).execute()
    return Run.objects.get(pk=run_id)


def runs_dir(run: Run) -> Path:
    return Path(settings.BENCH_RUNS_DIR) / str(run.pk)


class RunSession:
    def __init__(self, run: Run, *, parent: RunSession | None = None) -> None:
        self.run = run
        self.parent = parent
        self.version: TaskVersion = run.task_version
        self.attempt = run.attempt
        self.store = BlobStore()
        self.dir = runs_dir(run)
        # Each attempt has its own folder: an old attempt that finds out late it lost the run removes only its own.
        self.workspace = self.dir / f"workspace-{self.attempt}"
        started = run.started_at or timezone.now()
        elapsed = (timezone.now() - started).total_seconds()
        self.deadline = time.monotonic() + max(run.max_time_s - elapsed, 0)
        self.step_index = run.steps_count
        self.live = HeadTail(8000)
        self.live_dirty = False
        self._last_check = self._last_beat = self._last_live = 0.0
        self.channel: AgentChannel | None = None
        self.environment: Environment | None = None
        self.snapshotter = None
        self.current_action: str | None = None
        self.current_started: datetime | None = None

    # -- ticking: heartbeat, cancel, limits, live output ---------------------------------------------------
    def beat(self) -> None:
        """Tell the reaper this run's worker is alive (a run waiting for a nested validation run)."""
        now = time.monotonic()
        if now - self._last_beat >= settings.BENCH_HEARTBEAT_S:
            self._last_beat = now
            Run.objects.filter(pk=self.run.pk, attempt=self.attempt).update(heartbeat_at=timezone.now())
        if self.parent is not None:
            self.parent.beat()

    def tick(self) -> None:
        now = time.monotonic()
        if self.parent is not None:
            self.parent.beat()
        if now - self._last_check >= 1.0:
            self._last_check = now
            row = Run.objects.filter(pk=self.run.pk).values("status", "attempt", "cancel_requested_at").first()
            if row is None or row["attempt"] != self.attempt or row["status"] not in Run.LIVE:
                raise LostOwnership()
            if row["cancel_requested_at"] is not None:
                raise Interrupted("cancelled")
        if now >= self.deadline:
            raise Interrupted("time")
        if now - self._last_beat >= settings.BENCH_HEARTBEAT_S or (self.live_dirty and now - self._last_live >= 2):
            self._last_beat = self._last_live = now
            fields = {"heartbeat_at": timezone.now()}
            if self.live_dirty:
                fields["live_output"] = db_text(self.live.text())
                self.live_dirty = False
            Run.objects.filter(pk=self.run.pk, attempt=self.attempt).update(**fields)

    def on_output(self, stream: str, data: bytes) -> None:
        self.live.write(data)
        self.live_dirty = True

    def transition(self, source: str, target: str) -> None:
        if not Run.objects.filter(pk=self.run.pk, status=source, attempt=self.attempt).update(
            status=target, heartbeat_at=timezone.now()
        ):
            raise LostOwnership()
        self.run.status = target

    # -- the whole run -------------------------------------------------------------------------------------
    def execute(self) -> None:
        self.sandbox = None
        try:
            self.sandbox = get_sandbox(self.run.sandbox or None)
            if self.run.purpose == Run.Purpose.BENCHMARK:
                self.ensure_validated()
            prepared = task_version_prepare(self.version, sandbox=self.sandbox, tick=self.tick)
            self.layout(prepared)
            self.transition(Run.Status.PREPARING, Run.Status.RUNNING)
            ending = self.converse(prepared)
            self.environment.close()  # nothing may run in the workspace while it is snapshotted and scored
            final_sha, manifest = self.snapshotter.take()
            Run.objects.filter(pk=self.run.pk).update(final_snapshot=final_sha)
            result = None
            if ending.evaluate:
                self.transition(Run.Status.RUNNING, Run.Status.EVALUATING)
                result = evaluate(prepared, manifest, sandbox=self.sandbox, tick=self.tick)
            self.finish(ending, result)
        except LostOwnership:
            log.warning("run %s: no longer ours (attempt %s); stopping without writing", self.run.pk, self.attempt)
        except Interrupted as exc:
            self.finish(self.interrupted_ending(str(exc)), None)
        except (TaskPreparationError, SandboxError) as exc:
            self.finish(Ending(Run.Status.FAILED, Run.FailureKind.INFRASTRUCTURE, str(exc), False), None)
        except RunAborted as exc:
            self.finish(exc.ending, None)
        except Exception:
            log.exception("run %s crashed", self.run.pk)
            self.finish(
                Ending(
                    Run.Status.FAILED,
                    Run.FailureKind.INFRASTRUCTURE,
                    "internal error in the runner:\n" + traceback.format_exc()[-4000:],
                    False,
                ),
                None,
            )
        finally:
            if self.environment is not None:
                self.environment.close()
            if self.channel is not None:
                self.channel.close()
            remove_tree(self.workspace)

    def interrupted_ending(self, reason: str) -> Ending:
        if reason == "cancelled":
            return Ending(Run.Status.CANCELLED, error="cancelled by request", evaluate=False)
        return Ending(Run.Status.TIMED_OUT, Run.FailureKind.LIMIT, f"reached the time limit of {self.run.max_time_s} s")

    def ensure_validated(self) -> None:
        """A benchmark run needs a measured baseline: validate the task version first if nobody has."""
        from .services import task_version_validate_queue

        waited_until = time.monotonic() + self.version.max_time_s + settings.BENCH_EVAL_TIMEOUT_S + 600
        while True:
            version = TaskVersion.objects.get(pk=self.version.pk)
            self.version = self.run.task_version = version
            if version.status == TaskVersion.Status.READY:
                return
            if version.status == TaskVersion.Status.FAILED:
                raise RunAborted(
                    Ending(
                        Run.Status.FAILED,
                        Run.FailureKind.INFRASTRUCTURE,
                        f"task {version.task.slug} v{version.number} failed validation:\n{version.validation_log}",
                        False,
                    )
                )
            if version.status == TaskVersion.Status.PENDING:
                # Queued as well as run here: if this worker dies first, another one picks the message up;
                # whoever claims it first runs it, the other finds it taken.
                validation = task_version_validate_queue(version=version, enqueue=True)
                if validation is not None:
                    log.info(
                        "run %s: validating task version %s first (run %s)",
                        self.run.pk,
                        version,
                        validation.pk,
                    )
                    run_execute(validation.pk, worker=self.run.worker, parent=self)
                continue
            if time.monotonic() > waited_until:
                raise RunAborted(
                    Ending(
                        Run.Status.FAILED,
                        Run.FailureKind.INFRASTRUCTURE,
                        f"task {version.task.slug} v{version.number} is still validating; gave up waiting",
                        False,
                    )
                )
            self.tick()
            time.sleep(1.0)

    def layout(self, prepared: PreparedTask) -> None:
        """The run's workspace: the latest committed snapshot (or the task's env), read-only data linked."""
        remove_tree(self.workspace)
        self.dir.mkdir(parents=True, exist_ok=True)
        last = Step.objects.filter(run=self.run).order_by("-index").values_list("snapshot", flat=True).first()
        manifest = self.store.manifest_load(last) if last else prepared.env_manifest
        self.snapshotter = workspace_restore(
            manifest, self.workspace, self.store, read_only=set(prepared.read_only_files), sandbox=self.sandbox
        )
        if not self.run.initial_snapshot:
            self.run.initial_snapshot = prepared.env_manifest_sha
            Run.objects.filter(pk=self.run.pk).update(initial_snapshot=prepared.env_manifest_sha)
        resources = self.version.resources or {}
        cpus = float(resources.get("cpus", 1))
        self.environment = Environment(
            workspace=self.workspace,
            sandbox=self.sandbox,
            read_only_patterns=list(self.version.read_only_patterns),
            read_only_files=prepared.read_only_files,
            limits=Limits(
                memory_mb=int(resources.get("memory_mb", 4096)) * 2,
                cpus=cpus,
                gpus=int(resources.get("gpus", 0)),
                cpu_seconds=settings.BENCH_ACTION_CPU_S or int(settings.BENCH_ACTION_TIMEOUT_S * max(cpus, 1)),
            ),
            action_timeout_s=settings.BENCH_ACTION_TIMEOUT_S,
            observation_limit=settings.BENCH_OBSERVATION_LIMIT,
            on_output=self.on_output,
            tick=self.tick,
            python=sandbox_python(),
            cpus=int(cpus),
            research_problem=self.version.research_problem,
            llm=self.action_llm if self.run.model else None,
            workspace_limit_mb=settings.BENCH_WORKSPACE_LIMIT_MB,
        )

    def action_llm(self, messages: list[dict], purpose: str) -> str:
        """Completions for the LLM-backed actions, on the agent's fast model, counted to this run and step."""
        model = (self.run.agent.config or {}).get("fast_model") or self.run.model
        try:
            result = complete(
                run=self.run,
                messages=messages,
                model=model,
                step_index=self.step_index,
                purpose=purpose,
                tick=self.tick,
            )
        except LLMError as exc:
            if exc.kind == "request":
                raise EnvError(f"the LLM call failed: {exc}") from exc
            raise
        return result.text

    # -- the conversation with the agent -------------------------------------------------------------------
    def start_message(self) -> dict:
        run, version = self.run, self.version
        history = [
            {
                "step": s.index,
                "action": s.action,
                "input": s.action_input,
                "entries": s.entries,
                "observation": s.observation,
            }
            for s in Step.objects.filter(run=run).order_by("index")
        ]
        return {
            "type": "start",
            "protocol": 1,
            "run": {"id": run.pk, "attempt": run.attempt, "model": run.model},
            "task": {
                "slug": run.task.slug,
                "title": run.task.title,
                "research_problem": version.research_problem,
                "script": version.script_name,
                "metric": {"name": version.metric_name, "higher_is_better": version.higher_is_better},
            },
            "actions": catalogue_for_agent(self.environment.action_names),
            "limits": {
                "max_steps": run.max_steps,
                "max_time_s": run.max_time_s,
                "max_tokens": run.max_tokens,
                "max_cost": float(run.max_cost) if run.max_cost is not None else None,
            },
            "config": dict(run.agent.config or {}),
            "history": history,
        }

    def start_agent(self) -> AgentChannel:
        agent = self.run.agent
        if not agent.is_trusted and not self.sandbox.isolates:
            raise SandboxError(
                f"the {self.sandbox.name} sandbox does not isolate processes and runs built-in agents only; "
                "use BENCH_SANDBOX=bwrap or docker for uploaded agents"
            )
        mounts = [Mount(AGENTS_DIR, "/opt/mlab/mlab_agents")]
        python_path = "/opt/mlab"
        if agent.package_path:
            mounts.append(Mount(Path(agent.package_path), "/opt/agent"))
            python_path += ":/opt/agent"
        proc = self.sandbox.popen(
            [sandbox_python(), "-u", "-m", agent.entrypoint],
            mounts=mounts,
            cwd="/tmp",
            env={"PYTHONPATH": python_path, "MLAB_RUN_ID": str(self.run.pk)},
            limits=Limits(memory_mb=4096),
            stdin=subprocess.PIPE,
        )
        return AgentChannel(proc, self.dir / f"agent-{self.attempt}.stderr.log")

    def converse(self, prepared: PreparedTask) -> Ending:
        self.channel = channel = self.start_agent()
        channel.send(self.start_message(), tick=self.tick)
        bad_in_a_row = 0
        try:
            if self.step_index >= self.run.max_steps:
                return self.end_for_steps()
            while True:
                try:
                    message = channel.receive(tick=self.tick)
                except BadMessage as exc:
                    bad_in_a_row += 1
                    observation = (
                        f"ProtocolError: your last line was not understood: {exc}. Write one JSON object per "
                        'line: {"type": "act", "action": "<action name>", "input": {...}, "entries": {...}} '
                        'or {"type": "llm", "messages": [{"role": "user", "content": "..."}]}.'
                    )
                    self.record(
                        "Invalid Message",
                        {"line": exc.line_preview},
                        {},
                        ActionOutcome(observation, error=True),
                    )
                    channel.send({"type": "error", "step": self.step_index - 1, "message": observation, "error": True})
                    if bad_in_a_row >= MAX_BAD_MESSAGES:
                        channel.finish()
                        return Ending(
                            Run.Status.FAILED,
                            Run.FailureKind.AGENT,
                            f"the agent wrote {MAX_BAD_MESSAGES} lines in a row that were not protocol messages",
                        )
                    if self.step_index >= self.run.max_steps:
                        return self.end_for_steps()
                    continue
                bad_in_a_row = 0
                if message["type"] == "llm":
                    channel.send(self.complete(message), tick=self.tick)
                    continue
                outcome = self.act(message)
                answer = {
                    "type": "observation",
                    "step": self.step_index - 1,
                    "observation": outcome.observation,
                    "error": outcome.error,
                    "done": outcome.final,
                }
                channel.send(answer, tick=self.tick)
                if outcome.final:
                    channel.finish(grace_s=FINAL_ANSWER_GRACE_S)
                    return Ending(Run.Status.FINISHED)
                if self.step_index >= self.run.max_steps:
                    return self.end_for_steps()
        except AgentExited as exc:
            return Ending(
                Run.Status.FAILED,
                Run.FailureKind.AGENT,
                f"the agent process exited (code {exc.exit_code}) without a Final Answer",
            )
        except Interrupted as exc:
            reason = "it was cancelled" if str(exc) == "cancelled" else "it reached its time limit"
            self.record_interrupted(reason)
            channel.finish()
            return self.interrupted_ending(str(exc))
        except LLMError as exc:
            kind = Run.FailureKind.LIMIT if exc.kind == "budget" else Run.FailureKind.INFRASTRUCTURE
            self.record_interrupted(str(exc))
            channel.send({"type": "end", "reason": str(exc)})
            channel.finish(grace_s=5.0)
            return Ending(Run.Status.FAILED, kind, str(exc))

    def record_interrupted(self, reason: str) -> None:
        """The action in progress when the run had to end is recorded too, saying why it did not finish."""
        if self.current_action is not None:
            self.record(
                self.current_action,
                self.current_input,
                self.current_entries,
                ActionOutcome(f"EnvError: the run ended while this action was running: {reason}.", error=True),
            )

    def end_for_steps(self) -> Ending:
        self.channel.send({"type": "end", "reason": f"the run reached its limit of {self.run.max_steps} steps"})
        self.channel.finish(grace_s=5.0)
        return Ending(Run.Status.FAILED, Run.FailureKind.LIMIT, f"reached the step limit of {self.run.max_steps} steps")

    def act(self, message: dict) -> ActionOutcome:
        self.current_action = str(message["action"])[:100]
        self.current_input = message.get("input", {})
        self.current_entries = message.get("entries") or {}
        self.current_started = timezone.now()
        Run.objects.filter(pk=self.run.pk).update(live_action=db_text(self.current_action), live_output="")
        outcome = self.environment.execute(message["action"], self.current_input)
        self.record(self.current_action, self.current_input, self.current_entries, outcome)
        if outcome.final:
            answer = self.current_input.get("final_answer", "") if isinstance(self.current_input, dict) else ""
            Run.objects.filter(pk=self.run.pk).update(final_answer=db_text(str(answer)[:20_000]))
        return outcome

    def complete(self, message: dict) -> dict:
        from .llm import completion_for_run

        return completion_for_run(run=self.run, step_index=self.step_index, message=message, tick=self.tick)

    def record(self, action: str, action_input: object, entries: dict, outcome: ActionOutcome) -> Step:
        """Commit the step (with the workspace snapshot after it) before the agent sees the observation."""
        snapshot, _ = self.snapshotter.take()
        full = self.store.put_bytes(outcome.full_observation.encode()) if outcome.full_observation else ""
        started = self.current_started or timezone.now()
        with transaction.atomic():
            step = Step.objects.create(
                run=self.run,
                index=self.step_index,
                action=db_text(action[:100]),
                action_input=db_json(_bounded_input(action_input, self.store)),
                entries=db_json(_clean_entries(entries)),
                observation=db_text(outcome.observation),
                observation_blob=full,
                is_error=outcome.error,
                started_at=started,
                duration_s=(timezone.now() - started).total_seconds(),
                snapshot=snapshot,
                low_level=db_json(outcome.low_level),
                detail=db_json(outcome.detail),
            )
            calls = LLMCall.objects.filter(run=self.run, step__isnull=True, step_index=self.step_index)
            usage = calls.aggregate(tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"), cost=Sum("cost"))
            if usage["tokens_in"] is not None:
                Step.objects.filter(pk=step.pk).update(
                    tokens_in=usage["tokens_in"], tokens_out=usage["tokens_out"], cost=usage["cost"]
                )
            calls.update(step=step)
            Run.objects.filter(pk=self.run.pk).update(
                steps_count=F("steps_count") + 1,
                live_action="",
                live_output="",
                cpu_seconds=F("cpu_seconds") + float(outcome.detail.get("cpu_seconds", 0)),
                peak_memory_mb=Greatest(F("peak_memory_mb"), float(outcome.detail.get("max_rss_mb", 0))),
            )
        self.step_index += 1
        self.current_action = self.current_started = None
        self.live = HeadTail(8000)
        self.live_dirty = False
        return step

    # -- the end -------------------------------------------------------------------------------------------
    def finish(self, ending: Ending, result: EvalResult | None) -> None:
        """Record how the run ended. If that fails, the run is still ended (as an infrastructure failure)
        rather than left live for the reaper to run again."""
        try:
            self._finish(ending, result)
        except Exception as exc:
            log.exception("run %s: could not record its end", self.run.pk)
            Run.objects.filter(pk=self.run.pk, status__in=Run.LIVE, attempt=self.attempt).update(
                status=Run.Status.FAILED,
                failure_kind=Run.FailureKind.INFRASTRUCTURE,
                error=db_text(f"the run ended ({ending.status}) but recording it failed: {exc}"[:4000]),
                finished_at=timezone.now(),
            )

    def _finish(self, ending: Ending, result: EvalResult | None) -> None:
        now = timezone.now()
        run = Run.objects.select_related("task_version").get(pk=self.run.pk)
        fields = {
            "status": ending.status,
            "failure_kind": ending.failure_kind,
            "error": db_text(ending.error),
            "finished_at": now,
            "wall_seconds": (now - (run.started_at or now)).total_seconds(),
            "live_action": "",
            "live_output": "",
        }
        if self.channel is not None:
            self.channel.finish()
            fields["stderr_tail"] = db_text(self.channel.stderr_tail.text())
            fields["cpu_seconds"] = run.cpu_seconds + self.channel.cpu_seconds
            fields["peak_memory_mb"] = max(run.peak_memory_mb, self.channel.max_rss_mb)
        if result is not None:
            fields["final_score"] = result.score
            fields["eval_error"] = db_text((result.error + ("\n" + result.log if result.log else ""))[-8000:])
            if result.score is None and not result.error:
                fields["eval_error"] = "evaluation produced no score"
        with transaction.atomic():
            updated = Run.objects.filter(pk=run.pk, status__in=Run.LIVE, attempt=self.attempt).update(**fields)
            if not updated:
                log.warning("run %s: finished elsewhere; not overwriting", run.pk)
                return
            version = TaskVersion.objects.select_for_update().get(pk=run.task_version_id)
            if run.purpose == Run.Purpose.VALIDATION:
                _validation_record(version, ending, result, fields["wall_seconds"], run_id=run.pk)
            if result is not None:
                Run.objects.filter(pk=run.pk).update(
                    improvement=version.improvement_of(result.score),
                    succeeded=version.succeeded_with(result.score),
                )
        log.info("run %s ended %s (score %s)", run.pk, ending.status, result and result.score)


class RunAborted(Exception):
    def __init__(self, ending: Ending) -> None:
        super().__init__(ending.error)
        self.ending = ending


def fail_validation_if_needed(run: Run) -> None:
    """A validation run that ended without a worker finishing it leaves its task version failed, not stuck."""
    if run.purpose == Run.Purpose.VALIDATION:
        with transaction.atomic():
            version = TaskVersion.objects.select_for_update().get(pk=run.task_version_id)
            _validation_record(version, Ending(Run.Status.FAILED, error=run.error or "the run failed"), None, 0)


def _validation_record(
    version: TaskVersion, ending: Ending, result: EvalResult | None, wall: float, *, run_id: int | None = None
) -> None:
    """The baseline agent's run on a version: its score becomes the version's measured baseline."""
    now = timezone.now()
    if ending.status == Run.Status.CANCELLED:
        version.status = TaskVersion.Status.PENDING
        version.validation_log = "validation was cancelled"
    elif result is not None and result.score is not None:
        version.status = TaskVersion.Status.READY
        version.baseline_score = result.score
        # The baseline's time is the starter script's run, not the task's (cached) preparation.
        scripts = Step.objects.filter(run_id=run_id, action="Execute Script").aggregate(total=Sum("duration_s"))
        version.baseline_time_s = scripts["total"] if scripts["total"] is not None else wall
        version.validated_at = now
        version.validation_log = (
            f"baseline {version.metric_name} = {result.score:.6g}; the starter script ran in "
            f"{version.baseline_time_s:.1f} s (the whole validation run took {wall:.1f} s)"
        )
    else:
        version.status = TaskVersion.Status.FAILED
        version.validated_at = now
        reason = (result.error if result else "") or ending.error or "the baseline produced no score"
        failed_script = (
            Step.objects.filter(run_id=run_id, action="Execute Script", is_error=True).order_by("-index").first()
            if run_id
            else None
        )
        if failed_script is not None:
            reason += f"\n\nThe starter script failed:\n{failed_script.observation[-4000:]}"
        version.validation_log = db_text(f"the baseline run did not produce a score: {reason}"[-8000:])
    version.save(update_fields=["status", "baseline_score", "baseline_time_s", "validated_at", "validation_log"])


def _clean_entries(entries: object) -> dict:
    if not isinstance(entries, dict):
        return {"(entries)": str(entries)[:ENTRY_LIMIT]}
    return {str(k)[:100]: (v if isinstance(v, str) else str(v))[:ENTRY_LIMIT] for k, v in entries.items()}


def _bounded_input(action_input: object, store: BlobStore) -> object:
    import json

    try:
        text = json.dumps(action_input)
    except (TypeError, ValueError):
        return {"(unserialisable input)": repr(action_input)[:ENTRY_LIMIT]}
    if len(text) <= INPUT_LIMIT:
        return action_input
    return {"(input too large to show)": f"{len(text)} bytes", "blob": store.put_bytes(text.encode())}
