"""The agent SDK: ``env.act(...)`` and ``env.complete(...)`` over the agent protocol.

The protocol is JSON lines on stdin/stdout. The environment's first line is ``{"type": "start", ...}`` with
the task, the action catalogue, the limits, the agent's configuration and any earlier steps (a resumed or
forked run; a resumed run's start also says ``resume``: its attempt and why). The agent then writes requests,
one per line, and reads one answer per request:

    -> {"type": "act", "action": "List Files", "input": {"dir_path": "."}, "entries": {"Thought": "..."}}
    <- {"type": "observation", "step": 0, "observation": "...", "done": false}
    -> {"type": "llm", "messages": [{"role": "user", "content": "..."}], "purpose": "edit"}
    <- {"type": "completion", "text": "...", "tokens_in": 12, "tokens_out": 40}

An ``llm`` request may offer the model functions, as OpenAI's protocol does (``tools``, ``tool_choice``); the
answer then has the functions it called, ``tool_calls``, and the conversation goes on with the assistant's message
(content null, its ``tool_calls``) and a ``{"role": "tool", "tool_call_id": ..., "content": ...}`` message per call.

An agent that carries out a high-level action with its own code (MLAgentBench's Understand File, ...) takes the
low-level actions it needs with ``low`` messages, then sends the step with the observation it made:

    -> {"type": "low", "action": "Read File", "input": {"file_name": "train.py"}}
    <- {"type": "observation", "step": 3, "observation": "...", "done": false}
    -> {"type": "act", "action": "Understand File", "input": {...}, "entries": {...}, "observation": "..."}

Any answer may instead be ``{"type": "error", "message": ...}`` or ``{"type": "end", "reason": ...}`` (the
run is over: stop). Anything an agent prints goes to stderr, which the platform keeps as the agent's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

PROTOCOL_VERSION = 1
INVALID_MESSAGE = "Invalid Message"


class RunEnded(Exception):
    """The environment ended the run (final answer, limit, cancel). The agent should return."""


class LLMError(Exception):
    """A completion could not be made (budget, endpoint failure, no model configured)."""


@dataclass
class Observation:
    text: str
    step: int
    done: bool = False
    error: bool = False

    def __str__(self) -> str:
        return self.text


@dataclass
class Start:
    task: dict
    actions: list[dict]
    limits: dict
    config: dict
    history: list[dict] = field(default_factory=list)
    run: dict = field(default_factory=dict)
    resume: dict | None = None

    @property
    def research_problem(self) -> str:
        return self.task.get("research_problem", "")

    @property
    def action_names(self) -> list[str]:
        return [a["name"] for a in self.actions]


class Env:
    def __init__(self, reader: TextIO | None = None, writer: TextIO | None = None) -> None:
        self._reader = reader or sys.stdin
        if writer is None:
            # Keep the real stdout for the protocol; whatever the agent prints goes to stderr.
            writer = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
            sys.stdout = sys.stderr
        self._writer = writer
        message = self._read()
        if message.get("type") != "start":
            raise RuntimeError(f"expected a start message, got {message.get('type')!r}")
        self.start = Start(
            task=message.get("task", {}),
            actions=message.get("actions", []),
            limits=message.get("limits", {}),
            config=message.get("config", {}),
            history=message.get("history", []),
            run=message.get("run", {}),
            resume=message.get("resume"),
        )
        # Earlier steps (a resumed or forked run) are replayed: while the agent asks for the actions it took
        # before, in order, it gets their recorded observations without acting again. An agent that reads its
        # history itself calls take_history() first.
        self._replay = [step for step in self.start.history if step.get("action") != INVALID_MESSAGE]
        self.steps_taken = len(self.start.history) - len(self._replay)
        self.ended = False

    def take_history(self) -> list[dict]:
        """The run's earlier steps, for an agent that continues from them itself (no replay)."""
        self._replay = []
        self.steps_taken = len(self.start.history)
        return self.start.history

    def replayed(self, action: str, action_input: dict) -> Observation | None:
        """The recorded observation of a step the agent takes again (a resumed or forked run), else None."""
        if not self._replay:
            return None
        step = self._replay[0]
        if step.get("action") == action and _canonical(step.get("input", {})) == _canonical(action_input):
            self._replay.pop(0)
            self.steps_taken += 1
            return Observation(step.get("observation", ""), step=step.get("step", -1), error=bool(step.get("error")))
        self.take_history()  # the agent went another way: from here on, every action is taken
        return None

    def _read(self) -> dict:
        line = self._reader.readline()
        if not line:
            raise RunEnded("the environment closed the connection")
        return json.loads(line)

    def _request(self, payload: dict) -> dict:
        if self.ended:
            raise RunEnded("the run has ended")
        self._writer.write(json.dumps(payload) + "\n")
        self._writer.flush()
        answer = self._read()
        if answer.get("type") == "end":
            self.ended = True
            raise RunEnded(answer.get("reason", "the run has ended"))
        return answer

    def act(self, action: str, action_input: dict | None = None, **entries: Any) -> Observation:
        """Take one action. Keyword arguments are the agent's entries for this step (Thought=..., ...)."""
        return self._act({"type": "act", "action": action, "input": action_input or {}, "entries": _entries(entries)})

    def made(self, action: str, action_input: dict, observation: str, **entries: Any) -> Observation:
        """Record a high-level action the agent's own code carried out (its low-level actions taken with ``low``),
        with the observation it made."""
        message = {"type": "act", "action": action, "input": action_input, "entries": _entries(entries)}
        return self._act(message | {"observation": observation})

    def low(self, action: str, action_input: dict) -> Observation:
        """A low-level action (Read File, Write File, ...) inside a high-level action the agent carries out."""
        answer = self._request({"type": "low", "action": action, "input": action_input})
        return Observation(answer.get("observation", ""), step=answer.get("step", -1), error=bool(answer.get("error")))

    def _act(self, message: dict) -> Observation:
        if (replayed := self.replayed(message["action"], message["input"])) is not None:
            return replayed
        answer = self._request(message)
        if answer.get("type") == "error":
            return Observation(answer.get("message", ""), step=-1, error=True)
        self.steps_taken += 1
        observation = Observation(
            answer.get("observation", ""),
            step=answer.get("step", -1),
            done=bool(answer.get("done")),
            error=bool(answer.get("error")),
        )
        if observation.done:
            self.ended = True
        return observation

    def complete(self, messages: list[dict] | str, *, purpose: str = "", **options: Any) -> str:
        """Ask the run's model for a completion (made by the platform; tokens counted to the run)."""
        return self.chat(messages, purpose=purpose, **options).get("text", "")

    def chat(self, messages: list[dict] | str, *, purpose: str = "", **options: Any) -> dict:
        """``complete``'s whole answer: ``text``, the tokens, and the functions the model called (``tool_calls``, []
        for none) when ``options`` offer it some (``tools``, ``tool_choice``)."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        answer = self._request({"type": "llm", "messages": messages, "purpose": purpose, **options})
        if answer.get("type") != "completion":
            raise LLMError(answer.get("message", "the completion failed"))
        return {"tool_calls": [], **answer}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _entries(entries: dict[str, Any]) -> dict[str, str]:
    """Thought="..." or Research_Plan_and_Status="..." -> {"Thought": ..., "Research Plan and Status": ...}."""
    return {key.replace("_", " "): str(value) for key, value in entries.items() if value is not None}


def main(agent: Callable[[Env], None]) -> None:
    """Entry point for an agent module: ``if __name__ == "__main__": main(run)``."""
    env = Env()
    with contextlib.suppress(RunEnded):
        agent(env)
