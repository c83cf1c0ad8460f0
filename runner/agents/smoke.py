"""The smoke test of an uploaded agent package: started in the agent sandbox as a run starts it, sent the first
message of a tiny built-in task, it must answer with a protocol message within ``BENCH_AGENT_SMOKE_TIMEOUT_S``.

It runs on a worker (the job ``runner.smoke_test``: ``agent_smoke_run``), never within the upload's request: the
upload stores the package waiting for it (``Agent.Smoke.PENDING``), and the agent's page and the API show where it
is. A package that carries what a ready task is scored on fails it (``answers.py``), naming the task. An agent that
crashes on import, exits, writes something that is not a protocol message or stays silent fails it, with the tail
of what it wrote to stderr; no run of it is queued, and the submissions that waited for it are
rejected with that reason. One that passes has the submissions that waited for it decided as they would have been
at once (``submissions.submissions_after_smoke``).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from ..actions import catalogue_for_agent
from ..actions.handlers import HANDLERS, LLM_HANDLERS
from ..execution.agent_process import agent_popen
from ..execution.protocol import AgentChannel, AgentExited, BadMessage
from ..execution.sandboxes import get_sandbox
from ..models import Agent, Run, RunLimits
from ..sandbox import SandboxError
from .answers import Carried, answers_carried
from .submissions import submissions_after_smoke

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

#: Smoke-test jobs started for one agent before it is failed: each one that never ended lost its worker.
SMOKE_MAX_ATTEMPTS = 3


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


def carried_message(carried: list[Carried]) -> str:
    tasks = ", ".join(str(task) for task in carried)
    return (
        f"the package carries what a ready task is scored on: {tasks}. An agent must learn a task's answers in "
        "its runs; it may not bring them (the task's hidden answers, its test inputs, or a copy of the public "
        "data set it is split from). Remove those files and upload the package again."
    )


def agent_smoke_run(agent_id: int) -> str:
    """The smoke-test job: test a pending agent, record how it went (``Agent.Smoke``), then decide the submissions
    that waited for it. A job that finds the agent no longer pending (another job tested it) does nothing. Returns
    the state the agent is in."""
    pending = Agent.objects.filter(pk=agent_id, smoke_state=Agent.Smoke.PENDING)
    claimed = pending.filter(smoke_attempts__lt=SMOKE_MAX_ATTEMPTS).update(smoke_attempts=F("smoke_attempts") + 1)
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None or agent.smoke_state != Agent.Smoke.PENDING:
        return agent.smoke_state if agent else ""
    if not claimed:
        state, error = (
            Agent.Smoke.FAILED,
            (
                f"the smoke test was started {SMOKE_MAX_ATTEMPTS} times and never ended (its worker was lost each "
                "time); upload the package again to test it once more"
            ),
        )
    elif carried := answers_carried(Path(agent.package_path)):
        state, error = Agent.Smoke.FAILED, carried_message(carried)
    else:
        try:
            agent_smoke_test(
                package=Path(agent.package_path), entrypoint=agent.entrypoint, config=agent.config,
                uses_llm=agent.uses_llm,
            )  # fmt: skip
            state, error = Agent.Smoke.PASSED, ""
        except AgentSmokeError as exc:
            state, error = Agent.Smoke.FAILED, str(exc)
    if pending.update(smoke_state=state, smoke_error=error, smoke_tested_at=timezone.now()):
        agent.refresh_from_db()
        submissions_after_smoke(agent=agent)
    return Agent.objects.filter(pk=agent_id).values_list("smoke_state", flat=True).first() or ""
