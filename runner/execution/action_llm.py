"""The LLM behind the LLM-backed actions (Understand File, the editing actions, ...): the run's fast model, its
edit model for the editing actions, every completion made by the gateway and counted to the run and the step."""

from __future__ import annotations

from collections.abc import Callable

from ..actions import EnvError
from ..llm.gateway import LLMRequestError, complete
from ..models import Run


def action_model(run: Run, purpose: str) -> str:
    """The model an LLM-backed action uses: the run's edit model for edits, its fast model for the others."""
    allowed = run.models_allowed
    return allowed["edit" if purpose.startswith("edit") else "fast"] if allowed else ""


def action_complete(
    *,
    run: Run,
    step_index: int,
    messages: list[dict],
    purpose: str,
    options: dict,
    tick: Callable[[], None],
) -> str:
    """An action's completion on the model ``action_model`` picks; a refused request is the action's error."""
    model = action_model(run, purpose)
    try:
        result = complete(
            run=run,
            messages=messages,
            model=model,
            step_index=step_index,
            purpose=purpose,
            options=options,
            tick=tick,
        )
    except LLMRequestError as exc:
        raise EnvError(f"the LLM call failed: {exc}") from exc
    return result.text
