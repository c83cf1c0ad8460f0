"""The built-in agents (modules of the ``mlab_agents`` package, registered as Agent rows), and how any agent's
process starts in its sandbox (a run's conversation and an upload's smoke test start it the same way)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import mlab_agents

from .models import Agent
from .sandbox import Limits, Mount, Sandbox, SandboxError

AGENTS_DIR = Path(mlab_agents.__file__).resolve().parent

BUILTIN_AGENTS = [
    {
        "name": "baseline",
        "entrypoint": "mlab_agents.baseline",
        "description": "Runs the starter script unchanged and submits: this measures a task's baseline.",
        "uses_llm": False,
    },
    {
        "name": "research",
        "entrypoint": "mlab_agents.research",
        "description": (
            "MLAgentBench's research agent, as its code behaves: Reflection, Research Plan and Status, Fact Check, "
            "Thought, Action and Action Input at every step, 8 tools in the prompt, the last 3 steps in context, "
            "on the run's model."
        ),
        "uses_llm": True,
        "config": {
            "history_window": 3,
            "observation_window": 3,
            "max_retries": 5,
            "summarize_over": 5000,
            "retrieval": False,
            "agent_max_steps": 50,
        },
    },
    {
        "name": "tuner",
        "entrypoint": "mlab_agents.tuner",
        "description": (
            "Needs no LLM: finds the starter script's numeric hyperparameters, tries changes one at a time, keeps "
            "what improves the validation metric, and explains each step."
        ),
        "uses_llm": False,
    },
]


def agents_builtin_ensure() -> list[Agent]:
    """Create or update the built-in agents (version "1"); idempotent."""
    agents = []
    for spec in BUILTIN_AGENTS:
        agent, _ = Agent.objects.update_or_create(
            name=spec["name"],
            version="1",
            defaults={
                "kind": Agent.Kind.BUILTIN,
                "entrypoint": spec["entrypoint"],
                "description": spec["description"],
                "uses_llm": spec["uses_llm"],
                "config": spec.get("config", {}),
            },
        )
        agents.append(agent)
    return agents


def agent_popen(
    *, sandbox: Sandbox, entrypoint: str, package_path: str | Path = "", trusted: bool = False, run_id: int = 0
) -> subprocess.Popen:
    """Start an agent in ``sandbox``: no workspace, ``mlab_agents`` and its package (if any) mounted read-only,
    stdin, stdout and stderr piped. An agent that is not built in runs only in a sandbox that isolates."""
    if not trusted and not sandbox.isolates:
        raise SandboxError(
            f"the {sandbox.name} sandbox does not isolate processes and runs built-in agents only; "
            "use BENCH_SANDBOX=bwrap or docker for uploaded agents"
        )
    mounts = [Mount(AGENTS_DIR, "/opt/mlab/mlab_agents")]
    python_path = "/opt/mlab"
    if package_path:
        mounts.append(Mount(Path(package_path), "/opt/agent"))
        python_path += ":/opt/agent"
    return sandbox.popen(
        [sandbox.python, "-u", "-m", entrypoint],
        mounts=mounts,
        cwd="/tmp",
        env={"PYTHONPATH": python_path, "MLAB_RUN_ID": str(run_id)},
        limits=Limits(memory_mb=4096),
        stdin=subprocess.PIPE,
    )
