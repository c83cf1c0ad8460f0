"""The research environment's actions: a catalogue (data) and the code that carries each one out."""

from .catalogue import ACTIONS, ActionSpec, catalogue_for_agent, usage_text
from .environment import ActionOutcome, EnvError, Environment

__all__ = [
    "ACTIONS",
    "ActionOutcome",
    "ActionSpec",
    "EnvError",
    "Environment",
    "catalogue_for_agent",
    "usage_text",
]
