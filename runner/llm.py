"""Completions for agents, made by the platform (never from inside a sandbox)."""

from __future__ import annotations

from collections.abc import Callable

from .models import Run


def completion_for_run(*, run: Run, step_index: int, message: dict, tick: Callable[[], None]) -> dict:
    """Answer an agent's ``llm`` request. Without a configured model endpoint there is nothing to call."""
    return {
        "type": "error",
        "message": (
            f"no model endpoint is configured for model {run.model!r}; this run cannot make LLM calls"
            if run.model
            else "this run has no model; start it with --model NAME to let the agent make LLM calls"
        ),
    }
