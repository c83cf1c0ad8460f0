"""The smoke test of an uploaded agent package: started in the agent sandbox as a run starts it, sent the first
message of a tiny built-in task, it must answer with a protocol message within ``BENCH_AGENT_SMOKE_TIMEOUT_S``.

An agent that crashes on import, exits, writes something that is not a protocol message or stays silent is
refused before anything of it is kept; the reason comes with the tail of what it wrote to stderr.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from django.conf import settings

from ..actions import catalogue_for_agent
from ..actions.handlers import HANDLERS, LLM_HANDLERS
from ..execution.agent_process import agent_popen
from ..execution.protocol import AgentChannel, AgentExited, BadMessage
from ..execution.sandboxes import get_sandbox
from ..models import Run, RunLimits
from ..sandbox import SandboxError

STDERR_TAIL_CHARS = 2000

#: The task an uploaded agent is smoke-tested against: nothing is executed, only its first answer is read.
SMOKE_TASK = {
    "slug": "smoke-test",
    "title": "Smoke test",
    "research_problem": "Improve the number train.py writes to value.txt; eval.py reads it as the score.",
    "script": "train.py",
    "metric": {"name": "value", "higher_is_better": True},
}


SMOKE_MODEL = "smoke-test-model"


class AgentSmokeError(Exception):
    """The agent did not answer its first message; the message says how it failed, with its stderr tail."""


class _OutOfTime(Exception):
    pass


def smoke_start_message(*, config: dict, uses_llm: bool) -> dict:
    """The first message of a run of the smoke-test task, as a run's conversation sends it. An agent that uses an
    LLM is given a model's name (and the LLM-backed actions), as its runs will be; nothing it asks is answered."""
    model = SMOKE_MODEL if uses_llm else ""
    names = [*HANDLERS, *LLM_HANDLERS] if uses_llm else list(HANDLERS)
    return {
        "type": "start",
        "protocol": 1,
        "run": {"id": 0, "attempt": 1, "model": model, "models": Run(model=model).models_allowed},
        "task": SMOKE_TASK,
        "actions": catalogue_for_agent(names),
        "limits": RunLimits(max_steps=10, max_time_s=600).as_message(),
        "config": dict(config),
        "history": [],
        "resume": None,
    }


def agent_smoke_test(
    *, package: Path, entrypoint: str, config: dict, uses_llm: bool = False, timeout_s: float | None = None
) -> dict:
    """Start the package's agent and return its answer to the start message, or raise AgentSmokeError."""
    timeout_s = settings.BENCH_AGENT_SMOKE_TIMEOUT_S if timeout_s is None else timeout_s
    deadline = time.monotonic() + timeout_s

    def tick() -> None:
        if time.monotonic() > deadline:
            raise _OutOfTime

    with tempfile.TemporaryDirectory(prefix="agent-smoke-") as scratch:
        try:
            proc = agent_popen(sandbox=get_sandbox(), entrypoint=entrypoint, package_path=package)
        except SandboxError as exc:
            raise AgentSmokeError(f"the agent could not be started: {exc}") from exc
        channel = AgentChannel(proc, Path(scratch) / "stderr.log")
        try:
            channel.send(smoke_start_message(config=config, uses_llm=uses_llm), tick=tick)
            return channel.receive(tick=tick, tick_every=0.2)
        except _OutOfTime:
            reason = f"the agent did not answer its first message within {timeout_s:g} s"
        except AgentExited as exc:
            reason = f"the agent exited (code {exc.exit_code}) before answering its first message"
        except BadMessage as exc:
            reason = f"the agent's first answer is not a protocol message: {exc}"
        finally:
            channel.close()
        tail = channel.stderr_tail.text()[-STDERR_TAIL_CHARS:].strip()
        said = f"its stderr ends:\n{tail}" if tail else "it wrote nothing to stderr"
        raise AgentSmokeError(f"{reason}; {said}")
