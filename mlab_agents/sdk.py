"""The agent SDK: ``env.act(...)`` and ``env.complete(...)`` over the agent protocol.

The protocol is JSON lines on stdin/stdout. The environment's first line is ``{"type": "start", ...}`` with
the task, the action catalogue, the limits, the agent's configuration and any earlier steps (a resumed or
forked run). The agent then writes requests, one per line, and reads one answer per request:

    -> {"type": "act", "action": "List Files", "input": {"dir_path": "."}, "entries": {"Thought": "..."}}
    <- {"type": "observation", "step": 0, "observation": "...", "done": false}
    -> {"type": "llm", "messages": [{"role": "user", "content": "..."}], "purpose": "edit"}
    <- {"type": "completion", "text": "...", "tokens_in": 12, "tokens_out": 40}

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
        )
        self.steps_taken = len(self.start.history)
        self.ended = False

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
        answer = self._request(
            {"type": "act", "action": action, "input": action_input or {}, "entries": _entries(entries)}
        )
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
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        answer = self._request({"type": "llm", "messages": messages, "purpose": purpose, **options})
        if answer.get("type") != "completion":
            raise LLMError(answer.get("message", "the completion failed"))
        return answer.get("text", "")


def _entries(entries: dict[str, Any]) -> dict[str, str]:
    """Thought="..." or Research_Plan_and_Status="..." -> {"Thought": ..., "Research Plan and Status": ...}."""
    return {key.replace("_", " "): str(value) for key, value in entries.items() if value is not None}


def main(agent: Callable[[Env], None]) -> None:
    """Entry point for an agent module: ``if __name__ == "__main__": main(run)``."""
    env = Env()
    with contextlib.suppress(RunEnded):
        agent(env)
