"""How a run can end, as types: the ending recorded on the run, and the exceptions that carry one."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..actions.catalogue import EXECUTE_SCRIPT
from ..models import Run
from ..sandbox.process import Interrupted


@dataclass
class Ending:
    status: str
    failure_kind: str = ""
    error: str = ""
    evaluate: bool = True

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Ending:
        return cls(**{name: data[name] for name in ("status", "failure_kind", "error", "evaluate") if name in data})


class LostOwnership(Exception):
    """Another worker or a cancel owns the run now; stop without writing."""


class RunAborted(Exception):
    """The run cannot go on and ends as its ``ending`` says (without an evaluation)."""

    def __init__(self, ending: Ending) -> None:
        super().__init__(ending.error)
        self.ending = ending


class RunInterrupted(Interrupted):
    """The run must stop now, whatever is running (the sandbox kills it); ``reason`` says why in words."""

    reason = ""

    def ending(self, run: Run, *, during: str = "") -> Ending:
        """How the run ends; ``during``: the action it stopped, if any."""
        raise NotImplementedError


class Cancelled(RunInterrupted):
    """Someone asked the run to stop."""

    reason = "it was cancelled"

    def ending(self, run: Run, *, during: str = "") -> Ending:
        return Ending(Run.Status.CANCELLED, error="cancelled by request", evaluate=False)


class OutOfTime(RunInterrupted):
    """The run reached its wall-time limit; what the agent left is still scored. Its error says when the limit came
    while a script ran, which MLAgentBench's tables count (``Run.MLAGENTBENCH_COUNTED``)."""

    reason = "it reached its time limit"

    def ending(self, run: Run, *, during: str = "") -> Ending:
        inside = Run.INSIDE_SCRIPT if during == EXECUTE_SCRIPT else ""
        return Ending(
            Run.Status.TIMED_OUT, Run.FailureKind.LIMIT, f"reached the time limit of {run.max_time_s} s{inside}"
        )


class HandBack(Interrupted):
    """The worker is stopping: whatever runs is stopped and the run goes back to the queue, to be resumed
    from its last recorded step by another attempt (no ending: the run is not over)."""


def infrastructure_failure(error: str) -> Ending:
    """Not the agent's fault: ranked apart from what the agent did, never evaluated."""
    return Ending(Run.Status.FAILED, Run.FailureKind.INFRASTRUCTURE, error, evaluate=False)


def task_failure(error: str) -> Ending:
    """The task's own code failed (its prepare.py, or its validation): not the agent's doing, never ranked. In the
    run that validates the task, the version fails validation."""
    return Ending(Run.Status.FAILED, Run.FailureKind.TASK, error, evaluate=False)
