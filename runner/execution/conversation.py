"""The conversation with the agent: start its process, send it the task, answer each message it writes.

One handler per message kind: ``act`` (carry out an action, record the step, send the observation), ``low`` (a
low-level action inside an agent's own high-level one), ``llm`` (a completion through the gateway) and lines that
are not protocol messages (recorded as error steps). The
conversation returns how the run should end; the session records it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from task_bank.models import TaskVersion

from ..actions import ActionOutcome, catalogue_for_agent
from ..actions.catalogue import INVALID_MESSAGE
from ..llm.gateway import LLMBudgetError, LLMError, completion_for_run
from ..models import Run, Step
from ..sandbox import Sandbox
from ..sandbox.masks import package_masks
from .agent_process import agent_popen
from .endings import Ending, RunInterrupted
from .protocol import AgentChannel, AgentExited, BadMessage

MAX_BAD_MESSAGES = 10
FINAL_ANSWER_GRACE_S = 10.0


class Steps(Protocol):
    """What the conversation needs of the run it serves (``RunSession`` is one): its clock, and the steps."""

    step_index: int  # the index of the step the agent takes next
    storage_refusal: str  # why the run may store nothing more ("" while it may): it takes no more steps

    def agent_started(self) -> None:
        """The agent's process was started: what the run's actions need may start beside it (its scripts'
        sandbox)."""

    def tick(self) -> None:
        """Raises when the run must stop (cancelled, out of time, lost); called by everything that waits."""

    def act(self, message: dict) -> tuple[Step, ActionOutcome]:
        """Carry out an ``act`` message's action and record it as a step."""

    def low(self, message: dict) -> ActionOutcome:
        """Carry out a ``low`` message's low-level action, recorded under the step the agent takes next."""

    def record(self, action: str, action_input: object, entries: object, outcome: ActionOutcome) -> Step:
        """Record a step that is no action (a line that was not a protocol message)."""

    def record_interrupted(self, reason: str) -> str:
        """Record the action in progress, if any, as ended by ``reason``; returns its name ("" when none was)."""


class Conversation:
    def __init__(
        self,
        *,
        run: Run,
        version: TaskVersion,
        action_names: list[str],
        sandbox: Sandbox,
        stderr_path: Path,
        steps: Steps,
    ) -> None:
        self.run = run
        self.version = version
        self.action_names = action_names
        self.sandbox = sandbox
        self.stderr_path = stderr_path
        self.steps = steps
        self.channel: AgentChannel | None = None
        self.bad_in_a_row = 0

    # -- starting ------------------------------------------------------------------------------------------
    def start_message(self) -> dict:
        """The first message to the agent: the task, the action catalogue, the limits, its config, and every step
        recorded so far (``history``). A resumed run (attempt 2 or later) also gets ``resume``, saying why; a forked
        run's history is the steps it copied. The SDK replays that history to an agent that asks for the same
        actions again, in the same order (their recorded observations, without acting), so a deterministic agent
        (baseline, tuner) goes on where it was; an agent that rebuilds its state itself (the research agent) calls
        ``env.take_history()`` instead (``mlab_agents/sdk.py``). Each step records the attempt that took it
        (``Step.attempt``), so the trace shows where a new attempt took over."""
        run, version = self.run, self.version
        history = [
            {
                "step": s.index,
                "action": s.action,
                "input": s.action_input,
                "entries": s.entries,
                "observation": s.observation,
                "error": s.is_error,
            }
            for s in Step.objects.filter(run=run).order_by("index")
        ]
        resume = None
        if run.attempt > 1:
            resume = {
                "attempt": run.attempt,
                "reason": "the worker running this run stopped; the run goes on from its last recorded step",
            }
        return {
            "type": "start",
            "protocol": 1,
            "run": {"id": run.pk, "attempt": run.attempt, "model": run.model, "models": run.models_allowed},
            "task": {
                "slug": run.task.slug,
                "title": run.task.title,
                "research_problem": version.research_problem,
                "script": version.script_name,
                "metric": {"name": version.metric_name, "higher_is_better": version.higher_is_better},
            },
            "actions": catalogue_for_agent(self.action_names),
            "limits": run.limits.as_message(),
            "config": dict(run.agent.config or {}),
            "history": history,
            "resume": resume,
        }

    def start_agent(self) -> AgentChannel:
        agent = self.run.agent
        proc = agent_popen(
            sandbox=self.sandbox,
            entrypoint=agent.entrypoint,
            package_path=agent.package_path,
            trusted=agent.is_trusted,
            run_id=self.run.pk,
            masks=package_masks(self.sandbox, self.run.task_version.hidden_package_data),
        )
        return AgentChannel(proc, self.stderr_path)

    # -- the loop ------------------------------------------------------------------------------------------
    def converse(self) -> Ending:
        """Answer the agent until it gives its Final Answer, breaks the protocol, dies or hits a limit."""
        tick = self.steps.tick
        self.channel = channel = self.start_agent()
        self.steps.agent_started()
        channel.send(self.start_message(), tick=tick)
        try:
            ending = self.steps_left()
            while ending is None:
                try:
                    message = channel.receive(tick=tick)
                except BadMessage as exc:
                    ending = self.on_bad_message(exc)
                    continue
                self.bad_in_a_row = 0
                handler = {"llm": self.on_llm, "low": self.on_low, "act": self.on_act}[message["type"]]
                ending = handler(message)
            return ending
        except AgentExited as exc:
            return Ending(
                Run.Status.FAILED,
                Run.FailureKind.AGENT,
                f"the agent process exited (code {exc.exit_code}) without a Final Answer",  # Run.CLEAN_EXIT_ERROR
            )
        except RunInterrupted as exc:
            during = self.steps.record_interrupted(exc.reason)
            channel.finish()
            return exc.ending(self.run, during=during)
        except LLMError as exc:
            kind = Run.FailureKind.LIMIT if isinstance(exc, LLMBudgetError) else Run.FailureKind.INFRASTRUCTURE
            self.steps.record_interrupted(str(exc))
            channel.send({"type": "end", "reason": str(exc)})
            channel.finish(grace_s=5.0)
            return Ending(Run.Status.FAILED, kind, str(exc))

    def on_bad_message(self, exc: BadMessage) -> Ending | None:
        """A line that is not a protocol message: an error step, and the agent is told what was expected."""
        self.bad_in_a_row += 1
        observation = (
            f"ProtocolError: your last line was not understood: {exc}. Write one JSON object per "
            'line: {"type": "act", "action": "<action name>", "input": {...}, "entries": {...}} '
            'or {"type": "llm", "messages": [{"role": "user", "content": "..."}]}.'
        )
        step = self.steps.record(
            INVALID_MESSAGE, {"line": exc.line_preview}, {}, ActionOutcome(observation, error=True)
        )
        self.channel.send({"type": "error", "step": step.index, "message": observation, "error": True})
        if self.bad_in_a_row >= MAX_BAD_MESSAGES:
            self.channel.finish()
            return Ending(
                Run.Status.FAILED,
                Run.FailureKind.AGENT,
                f"the agent wrote {MAX_BAD_MESSAGES} lines in a row that were not protocol messages",
            )
        return self.steps_left()

    def on_llm(self, message: dict) -> None:
        """A completion for the agent; it belongs to the step the agent takes next."""
        steps = self.steps
        answer = completion_for_run(run=self.run, step_index=steps.step_index, message=message, tick=steps.tick)
        self.channel.send(answer, tick=steps.tick)

    def on_low(self, message: dict) -> None:
        """A low-level action inside the agent's own high-level action: carried out and recorded under the step the
        agent takes next, which is not taken yet (its ``act`` brings the observation its code made)."""
        outcome = self.steps.low(message)
        answer = {"type": "observation", "step": self.steps.step_index, "observation": outcome.observation}
        self.channel.send(answer | {"error": outcome.error, "done": False}, tick=self.steps.tick)

    def on_act(self, message: dict) -> Ending | None:
        """Carry out the action and record the step, then send the observation."""
        step, outcome = self.steps.act(message)
        answer = {
            "type": "observation",
            "step": step.index,
            "observation": outcome.observation,
            "error": outcome.error,
            "done": outcome.final,
        }
        self.channel.send(answer, tick=self.steps.tick)
        if outcome.final:
            self.channel.finish(grace_s=FINAL_ANSWER_GRACE_S)
            return Ending(Run.Status.FINISHED)
        return self.steps_left()

    # -- endings -------------------------------------------------------------------------------------------
    def steps_left(self) -> Ending | None:
        """None while the run may take another step; at the limit, the agent is told and the run ends.

        Every recorded step counts, a dead attempt's included: the agent keeps everything those steps did (the
        workspace, their observations), so not counting them would give a run on a crashing worker more steps than
        its peers. What is not counted is what was lost: the action that was running (done again) and the time
        off a worker (``Run.paused_seconds``)."""
        max_steps = self.run.max_steps
        if self.steps.storage_refusal:  # what it stored already stays, and what it left is scored
            told = error = self.steps.storage_refusal
        elif self.steps.step_index >= max_steps:
            told, error = (
                f"the run reached its limit of {max_steps} steps",
                f"{Run.STEP_LIMIT_ERROR}{max_steps} steps",
            )
        else:
            return None
        self.channel.send({"type": "end", "reason": told})
        self.channel.finish(grace_s=5.0)
        return Ending(Run.Status.FAILED, Run.FailureKind.LIMIT, error)
