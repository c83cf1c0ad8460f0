"""The research environment's actions: a catalogue (data), the code that carries each one out, and the
environment that runs them on one workspace.

- ``catalogue``: names (as constants), usage and descriptions, as sent to agents;
- ``types``: what every action shares (ActionOutcome, EnvError, the workspace path in the sandbox);
- ``files``, ``code``, ``research``, ``repl``: the handlers; ``handlers`` registers them by name;
- ``environment``: validates an action's input, calls its handler, bounds the observation.
"""

from .catalogue import ACTIONS, EXECUTE_SCRIPT, FINAL_ANSWER, ActionSpec, catalogue_for_agent, usage_text
from .environment import Environment
from .types import ActionOutcome, EnvError

__all__ = [
    "ACTIONS",
    "EXECUTE_SCRIPT",
    "FINAL_ANSWER",
    "ActionOutcome",
    "ActionSpec",
    "EnvError",
    "Environment",
    "catalogue_for_agent",
    "usage_text",
]
