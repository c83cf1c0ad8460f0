"""Which code carries out which action: the registry of handlers, by action name.

A handler takes the environment and the action's arguments (as the catalogue names them) and returns the
observation, or an ActionOutcome when it has more to say."""

from __future__ import annotations

from . import code, files, research
from .catalogue import FINAL_ANSWER
from .types import ActionEnv, ActionOutcome


def final_answer(env: ActionEnv, final_answer: str) -> ActionOutcome:
    return ActionOutcome("end", final=True)


#: The low-level file actions, which high-level actions call as recorded sub-steps.
LOW_LEVEL_HANDLERS = files.HANDLERS
#: The high-level actions: built on the low-level ones, and most on an LLM.
HIGH_LEVEL_HANDLERS = {**research.HANDLERS, **research.LLM_HANDLERS}
#: Every action that needs no LLM.
HANDLERS = {**files.HANDLERS, **code.HANDLERS, **research.HANDLERS, FINAL_ANSWER: final_answer}
#: The actions that need an LLM (offered only when the run has a model).
LLM_HANDLERS = research.LLM_HANDLERS
