"""What every action shares: its outcome, its error, and where the workspace is inside the sandbox."""

from __future__ import annotations

from dataclasses import dataclass, field

WORKSPACE = "/workspace"


class EnvError(Exception):
    """The action could not be carried out; the message goes back to the agent as an observation."""


@dataclass
class ActionOutcome:
    observation: str
    error: bool = False
    final: bool = False
    low_level: list[dict] = field(default_factory=list)
    detail: dict = field(default_factory=dict)
    full_observation: str | None = None  # when the observation was cut to the limit
