"""MLAgentBench's own agents, run unchanged: the adapter between an agent class of its code and the agent protocol.

An agent package whose ``agent.toml`` has an ``[mlagentbench]`` table (``agent = "ResearchAgent"``, the name of a
class in its ``MLAgentBench/agents/``) holds MLAgentBench's package folder as its repository has it. This module
is such a package's entry point (``runner.agents.packages``). It builds what MLAgentBench's ``runner.py`` gives an
agent and runs ``agent_cls(args, env).run(env)`` in the agent's sandbox:

- ``args``: ``runner.py``'s defaults, with the package's ``[mlagentbench.args]`` over them and the run's models as
  ``llm_name``, ``fast_llm_name`` and ``edit_script_llm_name`` (the models are the run's, never the package's).
  Unless retrieval is on (for the research agent), Retrieval from Research Log, Append Summary to Research Log and
  Reflection leave the prompt, and ``LLM.FAST_MODEL`` is the fast model, as ``runner.py`` sets them.
- ``env``: the package's own ``Environment`` class, its workspace the platform's (``Platform``): its
  ``execute`` and ``is_final`` and the observations they make are the package's; a low-level action is an ``act``
  request; a high-level action is the package's own function, whose files are ``low`` requests. Its actions are
  the package's ``action_infos`` without Request Help (a run asks no person), and the research problem is the
  task's, byte for byte.
- ``MLAgentBench.LLM``: its ``complete_text`` and ``complete_text_fast`` with their signatures, made by the
  platform's gateway (an ``llm`` request): every call stops at "Observation:" (and, for a Claude model, at its
  human turn), with the tokens and temperature the agent's code passes; where it passes none, the endpoint's
  defaults, which are what MLAgentBench's ``complete_text`` sends that model. Each prompt and completion is also
  written to the call's log file, as MLAgentBench's ``log_to_file`` does. The package's own ``LLM.py`` (API keys,
  provider clients) is never imported.
- A module the agent's code imports but does not use here and the sandbox lacks (``anthropic``, ``dacite``) is
  given as a stand-in.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
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
#: What MLAgentBench's environment passes every action besides its input (``static_kwargs_for_tools``).
STATIC_KWARGS = ("device", "python", "work_dir", "args", "read_only_files", "research_problem")
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
    """Give the agent's code the modules it imports but does not use here, where the sandbox has none: anthropic
    (its turn markers, which recent releases of anthropic's SDK lack: given where missing) and dacite (its
    environment reads a saved trace with it, to resume on its own)."""
    try:
        anthropic = importlib.import_module("anthropic")
    except ImportError:
        anthropic = sys.modules["anthropic"] = types.ModuleType("anthropic")
    for name, marker in (("HUMAN_PROMPT", HUMAN_PROMPT), ("AI_PROMPT", AI_PROMPT)):
        if not hasattr(anthropic, name):
            setattr(anthropic, name, marker)
    try:
        importlib.import_module("dacite")
    except ImportError:
        stand_in = types.ModuleType("dacite")
        stand_in.from_dict = lambda *args, **kwargs: None
        sys.modules["dacite"] = stand_in


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
        # complete_text_claude: what its environment imports (used only when it asks a person for the task).
        module.complete_text = module.complete_text_claude = self.complete_text

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
            error = self.schema.LLMError(str(exc))
            error.message = str(exc)  # what MLAgentBench's environment reads of it
            raise error from exc
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


class Platform:
    """What MLAgentBench's ``Environment`` does to the workspace, done by the platform; the rest (``execute``,
    ``is_final``, its observations and its errors) is the package's own class, which this comes before.

    - A low-level action (List Files, Execute Script, ...) is an ``act`` request: the platform carries it out and
      records the step.
    - A high-level action (Understand File, Edit Script (AI), Reflection, ...) runs the package's own function, so
      its prompts are the package's. The files it reads and writes are ``low`` requests (``PlatformFiles``); the
      step is recorded with the observation it made when the package's ``execute`` saves it (``save``).
    - Final Answer, an invalid action: the observation the package's ``execute`` made, recorded by ``save``."""

    def __init__(self, env: Env, args: argparse.Namespace, action_infos: dict, schema: types.ModuleType, llm) -> None:
        self._env, self._schema, self._llm = env, schema, llm
        self._platform_args = args
        self._recorded = False  # the step in progress was recorded by its own act request
        self._infos = {name: self._platform_side(info) for name, info in action_infos.items()}
        if not args.interactive:
            self._infos.pop("Request Help", None)
        self._problem = env.start.research_problem
        self._trace = schema.Trace(
            steps=[], low_level_steps=[], action_infos=self._infos, task_description=self._problem
        )
        self._started = time.time()
        self._log = os.path.join(args.log_dir, "env_log")

    def _platform_side(self, info):
        """A low-level action's function as an ``act`` request; a high-level one's as the package wrote it."""
        if info.name in self._high_level:
            return info
        return dataclasses.replace(info, function=lambda **kwargs: self._act(info.name, kwargs))

    _high_level: frozenset[str] = frozenset()

    def _act(self, name: str, kwargs: dict) -> str:
        action_input = {k: v for k, v in kwargs.items() if k not in ("log_file", "trace", *STATIC_KWARGS)}
        observation = self._env.act(name, action_input, **answer_entries(self._llm.last_answer))
        self._recorded = True
        return observation.text

    research_problem = property(lambda self: self._problem)
    benchmark_folder_name = property(lambda self: self._env.start.task.get("slug", "workspace"))
    log_dir = property(lambda self: self._log)
    work_dir = property(lambda self: ".")
    read_only_files = property(lambda self: [])
    action_infos = property(lambda self: self._infos)
    args = property(lambda self: self._platform_args)
    trace = property(lambda self: self._trace)
    start_time = property(lambda self: self._started)

    @property
    def static_kwargs_for_tools(self) -> dict:
        args = self._platform_args
        return {
            "device": args.device,
            "python": args.python,
            "work_dir": ".",
            "args": args,
            "read_only_files": [],
            "research_problem": self._problem,
        }

    def is_final(self) -> bool:
        return self._env.ended or super().is_final()

    def execute(self, action) -> str:
        if action.name in self._high_level and isinstance(action.args, dict):
            replayed = self._env.replayed(action.name, action.args)
            if replayed is not None:  # a resumed run's step: not carried out again
                self._trace.steps.append(self._schema.Step(action, replayed.text, time.time()))
                return replayed.text
        self._recorded = False
        return super().execute(action)

    def save(self, curr_step: int) -> None:
        """The package's ``execute`` made the step's observation: recorded here unless an act request did."""
        if self._recorded:
            return
        step = self._trace.steps[-1]
        action_input = step.action.args if isinstance(step.action.args, dict) else {"input": str(step.action.args)}
        entries = answer_entries(self._llm.last_answer)
        if step.action.name == "Final Answer":
            self._env.act("Final Answer", action_input, **entries)
        else:
            self._env.made(step.action.name, action_input, step.observation, **entries)


class PlatformFiles:
    """The file functions MLAgentBench's high-level actions call, as ``low`` requests: the agent's process never
    touches the workspace. A refusal raises the package's ``EnvException`` with the platform's words."""

    def __init__(self, env: Env, schema: types.ModuleType) -> None:
        self._env, self._schema = env, schema

    def _low(self, name: str, action_input: dict) -> str:
        observation = self._env.low(name, action_input)
        if observation.error:
            raise self._schema.EnvException(observation.text.removeprefix("EnvError: "))
        return observation.text

    def read_file(self, file_name: str, work_dir: str = ".", **kwargs: Any) -> str:
        return self._low("Read File", {"file_name": file_name})

    def write_file(self, file_name: str, content: str, work_dir: str = ".", **kwargs: Any) -> str:
        return self._low("Write File", {"file_name": file_name, "content": content})

    def append_file(self, file_name: str, content: str, work_dir: str = ".", **kwargs: Any) -> str:
        return self._low("Append File", {"file_name": file_name, "content": content})

    def copyfile(self, source: str, destination: str) -> str:
        """``shutil.copyfile`` of an edit's backup (``backup/<script>_<time>``, what Undo Edit Script restores),
        made by the platform. The paths are the package's, joined to its work folder ".": made relative."""
        self._low("Copy File", {"source": os.path.normpath(source), "destination": os.path.normpath(destination)})
        return destination


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
    files = PlatformFiles(env, schema)
    for name in ("read_file", "write_file", "append_file"):
        setattr(high, name, getattr(files, name))
    high.shutil = types.SimpleNamespace(copyfile=files.copyfile)
    action_infos = {info.name: info for info in [*low.LOW_LEVEL_ACTIONS, *high.HIGH_LEVEL_ACTIONS]}
    package_environment = importlib.import_module("MLAgentBench.environment").Environment
    high_level = frozenset(info.name for info in high.HIGH_LEVEL_ACTIONS)
    environment_class = type("Environment", (Platform, package_environment), {"_high_level": high_level})
    environment = environment_class(env, args, action_infos, schema, llm)
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
