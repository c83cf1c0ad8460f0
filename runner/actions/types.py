"""What every action shares: its outcome, its error, where the workspace is inside the sandbox, and what a handler
may use of the environment (``ActionEnv``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..sandbox import Limits, Mount, Sandbox

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


class ReplSession(Protocol):
    def run(self, command: str) -> ActionOutcome: ...


class ActionEnv(Protocol):
    """What an action's handler may use of the environment that calls it (``environment.Environment`` is the one):
    the workspace and its rules, the limits, the sandbox, the clock, and the building blocks of high-level actions.
    Handlers are typed by this, so they do not import the environment that imports them."""

    workspace: Path
    sandbox: Sandbox
    limits: Limits
    action_timeout_s: float
    observation_limit: int
    workspace_limit_mb: int
    python: str
    research_problem: str
    #: Whether a write keeps the file's previous version in backup/ (which it then keeps to itself): the
    #: platform's actions do; the low-level actions an agent's own high-level action takes do not, as MLAgentBench's.
    keeps_backups: bool
    on_output: Callable[[str, bytes], None] | None
    tick: Callable[[], None] | None

    @property
    def owner(self) -> tuple[int, int] | None: ...

    def name(self, rel: str) -> str:
        """A workspace path as the agent is shown it."""

    def kind(self, rel: str) -> str:
        """'file', 'dir', 'missing', or 'other' (a link or special file) for a workspace path."""

    def check_writable(self, rel: str, name: str | None = None) -> None: ...

    def low(self, name: str, args: dict) -> str:
        """Run a low-level action as part of the current one, recorded under the step."""

    def low_read_or_empty(self, file_name: str) -> str: ...

    def ask(self, prompt: str, purpose: str, options: dict) -> str:
        """A completion of the run's model for an LLM-backed action."""

    def repl(self) -> ReplSession: ...

    def script_process(self, argv: list[str]) -> Any:
        """Start a script in the workspace sandbox; a process as the runner's process functions take one."""

    def workspace_size_mb(self) -> float: ...

    def mounts(self) -> list[Mount]: ...

    def sandbox_env(self) -> dict[str, str]: ...
