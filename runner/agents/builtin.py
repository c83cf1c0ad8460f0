"""The built-in agents: modules of the ``mlab_agents`` package, registered as Agent rows."""

from __future__ import annotations

from ..models import Agent

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
        "name": "aide",
        "entrypoint": "mlab_agents.aide",
        "description": (
            "AIDE (aideml 0.2.2), its own tree search run unchanged: it drafts solutions, debugs and improves them, "
            "runs each in the workspace and reviews its output by a function call; its best node is scored. The "
            "run's model writes the code, its fast model reviews."
        ),
        "uses_llm": True,
        "config": {"aide": {"config": {}}},
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
