"""MLAgentBench's own agents, run unchanged: the adapter between an agent class of its code and the agent protocol.

An agent package whose ``agent.toml`` has an ``[mlagentbench]`` table (``agent = "ResearchAgent"``, the name of a
class in its ``MLAgentBench/agents/``) holds MLAgentBench's package folder as its repository has it. This module
is such a package's entry point (``runner.agents.packages``). It builds what MLAgentBench's ``runner.py`` gives an
agent and runs ``agent_cls(args, env).run(env)`` in the agent's sandbox:

- ``args``: ``runner.py``'s defaults, with the package's ``[mlagentbench.args]`` over them and the run's models as
  ``llm_name``, ``fast_llm_name`` and ``edit_script_llm_name`` (the models are the run's, never the package's).
  Unless retrieval is on (for the research agent), Retrieval from Research Log, Append Summary to Research Log and
  Reflection leave the prompt, and ``LLM.FAST_MODEL`` is the fast model, as ``runner.py`` sets them.
- ``env``: MLAgentBench's ``Environment`` interface over the protocol: ``research_problem``, ``action_infos`` (the
  uploaded package's own, from its ``low_level_actions`` and ``high_level_actions``), ``execute(Action)`` (an
  ``act`` request: the platform's environment carries it out and records the step), ``is_final()``, ``trace``.
- ``MLAgentBench.LLM``: its ``complete_text`` and ``complete_text_fast`` with their signatures, made by the
  platform's gateway (an ``llm`` request): every call stops at "Observation:" (and, for a Claude model, at its
  human turn), with the tokens and temperature the agent's code passes; where it passes none, the endpoint's
  defaults, which are what MLAgentBench's ``complete_text`` sends that model. Each prompt and completion is also
  written to the call's log file, as MLAgentBench's ``log_to_file`` does. The package's own ``LLM.py`` (API keys,
  provider clients) is never imported.
- A module the agent's code imports for constants only and the sandbox lacks (``anthropic``: its human and
  assistant turn markers) is given with those constants.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

from .sdk import Env, LLMError, RunEnded

#: ``runner.py``'s defaults of the arguments an agent reads.
RUNNER_DEFAULTS: dict[str, Any] = {
    "task": "debug",
    "max_steps": 50,
    "max_time": 5 * 60 * 60,
    "device": 0,
    "python": "python",
    "interactive": False,
    "resume": None,
    "resume_step": 0,
    "agent_type": "ResearchAgent",
    "llm_name": "claude-v1",
    "fast_llm_name": "claude-v1",
    "edit_script_llm_name": "claude-v1",
    "edit_script_llm_max_tokens": 4000,
    "agent_max_steps": 50,
    "actions_remove_from_prompt": [],
    "actions_add_to_prompt": [],
    "retrieval": False,
    "valid_format_entires": None,
    "max_steps_in_context": 3,
    "max_observation_steps_in_context": 3,
    "max_retries": 5,
    "langchain_agent": "zero-shot-react-description",
}
#: What ``runner.py`` takes out of the prompt unless the research agent has retrieval on.
WITHOUT_RETRIEVAL = ["Retrieval from Research Log", "Append Summary to Research Log", "Reflection"]
#: Anthropic's turn markers, which MLAgentBench's agents write into their prompts.
HUMAN_PROMPT, AI_PROMPT = "\n\nHuman:", "\n\nAssistant:"
ENTRY_NAMES = ("Reflection", "Research Plan and Status", "Fact Check", "Thought")
STOP = "Observation:"


def runner_args(env: Env, spec: dict, log_dir: str) -> argparse.Namespace:
    """The arguments ``runner.py`` would give the agent for this run."""
    models = env.start.run.get("models") or {}
    main = models.get("main") or env.start.run.get("model") or ""
    values = dict(RUNNER_DEFAULTS) | dict(spec.get("args") or {})
    values |= {
        "agent_type": spec["agent"],
        "llm_name": main,
        "fast_llm_name": models.get("fast") or main,
        "edit_script_llm_name": models.get("edit") or models.get("fast") or main,
        "log_dir": log_dir,
        "work_dir": ".",
        "max_steps": int(env.start.limits.get("max_steps") or RUNNER_DEFAULTS["max_steps"]),
        "max_time": int(env.start.limits.get("max_time_s") or RUNNER_DEFAULTS["max_time"]),
    }
    values["actions_remove_from_prompt"] = list(values["actions_remove_from_prompt"])
    if not values["retrieval"] or values["agent_type"] != "ResearchAgent":
        values["actions_remove_from_prompt"].extend(WITHOUT_RETRIEVAL)
    return argparse.Namespace(**values)


def constants_modules() -> None:
    """Give the agent's code the modules it imports for their constants, where the sandbox has none."""
    try:
        importlib.import_module("anthropic")
    except ImportError:
        stand_in = types.ModuleType("anthropic")
        stand_in.HUMAN_PROMPT, stand_in.AI_PROMPT = HUMAN_PROMPT, AI_PROMPT
        sys.modules["anthropic"] = stand_in


class Gateway:
    """MLAgentBench's ``LLM`` module, each call an ``llm`` request of the protocol."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.last_answer = ""  # the main model's latest answer: the step's entries, for the trace
        self.main_model = ""

    def module(self, fast_model: str, schema: types.ModuleType) -> types.ModuleType:
        module = types.ModuleType("MLAgentBench.LLM")
        module.FAST_MODEL = fast_model
        module.LLMError, module.TooLongPromptError = schema.LLMError, schema.TooLongPromptError
        module.log_to_file = log_to_file
        module.complete_text = self.complete_text

        def complete_text_fast(prompt: str, **kwargs: Any) -> str:
            return self.complete_text(prompt=prompt, model=module.FAST_MODEL, temperature=0.01, **kwargs)

        module.complete_text_fast = complete_text_fast
        self.schema = schema
        return module

    def complete_text(self, prompt: str, log_file: str | None = None, model: str = "", **kwargs: Any) -> str:
        stop = [HUMAN_PROMPT, STOP] if model.startswith("claude") else [STOP]
        options: dict[str, Any] = {"stop": list(kwargs.get("stop_sequences") or stop)}
        if kwargs.get("max_tokens_to_sample") is not None:
            options["max_tokens"] = int(kwargs["max_tokens_to_sample"])
        if kwargs.get("temperature") is not None:
            options["temperature"] = kwargs["temperature"]
        purpose = "agent" if model == self.main_model else "fast model"
        try:
            completion = self.env.complete(prompt, purpose=purpose, model=model or None, **options)
        except LLMError as exc:
            raise self.schema.LLMError(str(exc)) from exc
        if model == self.main_model:
            self.last_answer = completion
        if log_file:
            log_to_file(log_file, prompt, completion, model, options.get("max_tokens", "the endpoint's"))
        return completion


def log_to_file(log_file: str, prompt: str, completion: str, model: str, max_tokens_to_sample: Any) -> None:
    """The prompt and the completion, in the layout of MLAgentBench's call logs."""
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "a") as fh:
        fh.write("\n===================prompt=====================\n")
        fh.write(f"{HUMAN_PROMPT} {prompt} {AI_PROMPT}")
        fh.write(f"\n==================={model} response ({max_tokens_to_sample})=====================\n")
        fh.write(completion)
        fh.write("\n===================tokens=====================\n")


class Environment:
    """MLAgentBench's ``Environment`` as its agents use it, carried out by the platform's environment."""

    def __init__(self, env: Env, args: argparse.Namespace, action_infos: dict, schema: types.ModuleType, llm) -> None:
        self._env, self._schema, self._llm = env, schema, llm
        self._args = args
        self.action_infos = action_infos
        self.research_problem = env.start.research_problem
        self.log_dir = os.path.join(args.log_dir, "env_log")
        self.trace = schema.Trace(
            steps=[], low_level_steps=[], action_infos=action_infos, task_description=self.research_problem
        )
        self.start_time = time.time()
        self.read_only_files: list[str] = []
        self.benchmark_folder_name = env.start.task.get("slug", "workspace")

    @property
    def args(self) -> argparse.Namespace:
        return self._args

    def get_task_description(self) -> tuple[str, str]:
        return self.research_problem, self.benchmark_folder_name

    def is_final(self) -> bool:
        """As MLAgentBench decides: a Final Answer given, or the step or time limit reached (or the run ended)."""
        steps = self.trace.steps
        answered = any(step.action.name == "Final Answer" for step in steps)
        late = time.time() - self.start_time > self._args.max_time
        return self._env.ended or answered or len(steps) >= self._args.max_steps or late

    def execute(self, action) -> str:
        """The action carried out and recorded by the platform, with the entries of the answer that chose it."""
        action_input = action.args
        if action.name == "Final Answer" and not isinstance(action_input, dict):
            action_input = {"final_answer": str(action_input)}
        observation = self._env.act(action.name, action_input, **answer_entries(self._llm.last_answer))
        text = "end" if action.name == "Final Answer" else observation.text
        self.trace.steps.append(self._schema.Step(action, text, time.time()))
        return text


def answer_entries(answer: str) -> dict[str, str]:
    """The entries of an answer in MLAgentBench's format ("Thought: ..."), as keyword arguments of ``Env.act``."""
    found = {}
    names = "|".join(re.escape(name) for name in (*ENTRY_NAMES, "Action", "Action Input"))
    pieces = re.split(rf"^\s*({names})\s*:", answer, flags=re.MULTILINE)
    for name, text in zip(pieces[1::2], pieces[2::2], strict=False):
        if name in ENTRY_NAMES:
            found[name.replace(" ", "_")] = text.strip()
    return found


def agent_class(name: str) -> type:
    """The class ``name`` of the package's ``MLAgentBench/agents/`` (a module there that defines it)."""
    import MLAgentBench.agents as agents  # noqa: PLC0415 - the uploaded package, on the path only in the sandbox

    defining = re.compile(rf"^class {re.escape(name)}\b", re.MULTILINE)
    for path in sorted(Path(agents.__file__).parent.glob("*.py")):
        if defining.search(path.read_text(errors="replace")):
            return getattr(importlib.import_module(f"MLAgentBench.agents.{path.stem}"), name)
    raise SystemExit(f"no class {name} in MLAgentBench/agents/")


def run(env: Env) -> None:
    spec = env.start.config.get("mlagentbench") or {}
    constants_modules()
    import MLAgentBench  # noqa: PLC0415, F401 - the uploaded package
    import MLAgentBench.schema as schema  # noqa: PLC0415

    log_dir = tempfile.mkdtemp(prefix="mlagentbench-")
    args = runner_args(env, spec, log_dir)
    llm = Gateway(env)
    llm.main_model = args.llm_name
    sys.modules["MLAgentBench.LLM"] = MLAgentBench.LLM = llm.module(args.fast_llm_name, schema)
    low = importlib.import_module("MLAgentBench.low_level_actions")
    high = importlib.import_module("MLAgentBench.high_level_actions")
    action_infos = {info.name: info for info in [*low.LOW_LEVEL_ACTIONS, *high.HIGH_LEVEL_ACTIONS]}
    environment = Environment(env, args, action_infos, schema, llm)
    print("=====================================", file=sys.stderr)
    print("Research problem: ", environment.research_problem, file=sys.stderr)
    agent = agent_class(spec["agent"])(args, environment)
    final_message = agent.run(environment)
    print("=====================================", file=sys.stderr)
    print("Final message: ", final_message, file=sys.stderr)


def main() -> None:
    env = Env()
    with contextlib.suppress(RunEnded):
        run(env)


if __name__ == "__main__":
    main()
