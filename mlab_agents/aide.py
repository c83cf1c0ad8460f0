"""AIDE (the ``aideml`` package), run unchanged: the adapter between its agent loop and the agent protocol.

An agent package whose ``agent.toml`` has an ``[aide]`` table runs through this module (``runner.agents.packages``).
AIDE's own ``Agent`` drives the run as its ``aide`` command's loop does (``aide/run.py``): ``agent.step`` until its
steps are done, then its best node. Its search policy, its prompts and the parsing of its answers are its own code.
The platform supplies what AIDE expects of its surroundings, through the protocol, so the agent process never touches
the workspace:

- **Model calls**: AIDE's ``backend.query`` builds the messages itself (``compile_prompt_to_md``); the provider it
  calls is the platform's gateway (an ``llm`` request), with OpenAI's function calling for its review
  (``FunctionSpec.as_openai_tool_dict`` and its tool choice) and the call's arguments parsed as AIDE's OpenAI backend
  parses them. The code model is the run's main model, the review's its fast model (else the main one).
- **Code execution**: AIDE's interpreter is replaced by Write File of its ``runfile.py`` and Execute Script in the
  workspace's sandbox; the output and the time come back as AIDE's ``ExecutionResult``, with the exception a
  traceback names and the time line AIDE's interpreter adds.
- **Its folders and data preview**: ``input/`` (a link to each of the task's files) and ``working/``, as its
  prompts describe them, and AIDE's own ``data_preview.generate`` of them, made by a script in the sandbox.
- **Goal and metric**: the task's research problem as AIDE's goal, its metric and direction as AIDE's evaluation.
- **The end**: the search stops at AIDE's steps, or earlier when the run's steps or time would not leave room for
  another node and the end; the best node's code is then written and run again unless it ran last, and what it
  wrote to ``working/`` is copied to the workspace's root, so the final workspace, which the task's eval scores,
  holds its outputs where the task expects them.

Each node is two steps, Write File and Execute Script, whose entries say its stage (draft, debug, improve), its id,
its parent's and its plan; the review AIDE made of a node (bug or metric, and its summary) is an entry of the next
step. ``[aide.config]`` sets AIDE's own configuration keys (``agent.steps``, ``agent.search.num_drafts``, ...), never
its models.
"""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any

from .sdk import Env, LLMError, RunEnded, main

#: The file AIDE's interpreter writes each node's code to (its ``exec.agent_file_name``).
RUNFILE = "runfile.py"
#: The script that lays out AIDE's folders in the workspace and makes its data preview, in the sandbox. AIDE's
#: ``aide`` command copies the task's files into ``input/`` and gives its code ``working/``, and its prompts say so:
#: here ``input/`` holds a link to each of the task's files (no copy) and ``working/`` is made. The preview is AIDE's
#: own ``data_preview.generate`` of a folder that holds just those two, as its own workspace does.
SETUP_FILE = "aide_workspace.py"
SETUP_SCRIPT = """import os
import tempfile

from aide.utils.data_preview import generate

os.makedirs("working", exist_ok=True)
os.makedirs("input", exist_ok=True)
for name in sorted(os.listdir(".")):
    link = os.path.join("input", name)
    if name not in ("input", "working", "aide_workspace.py", "aide_collect.py") and not os.path.lexists(link):
        os.symlink(os.path.join("..", name), link)
view = tempfile.mkdtemp()
for name in ("input", "working"):
    os.symlink(os.path.abspath(name), os.path.join(view, name))
print(generate(view))
"""
#: The script that brings what the best node wrote into ``working/`` (AIDE's code saves its submission there) to the
#: workspace's root, where the task's eval reads its outputs: the files changed since the node's run began.
COLLECT_FILE = "aide_collect.py"
COLLECT_SCRIPT = """import os
import shutil

SINCE = {since}
copied = []
for folder, _, files in os.walk("working"):
    for name in files:
        source = os.path.join(folder, name)
        if os.path.getmtime(source) >= SINCE:
            target = os.path.relpath(source, "working")
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            shutil.copyfile(source, target)
            copied.append(target)
print("copied from working/ to the workspace:", ", ".join(sorted(copied)) or "nothing")
"""
#: The head the platform's Execute Script puts before a script's output.
EXECUTED = "The script has been executed. Here is the output:\n"
#: The last line of a Python traceback: the exception's class.
EXCEPTION_RE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)|[A-Za-z_][\w.]*)(?::|$)")


def aide_config(env: Env, table: dict) -> Any:
    """AIDE's configuration (its ``config.yaml``) with the package's keys over it, the run's models and the task's
    goal; no folders are made (the workspace is the platform's)."""
    from aide.utils.config import Config, _load_cfg  # noqa: PLC0415 - aideml, installed beside the platform
    from omegaconf import OmegaConf  # noqa: PLC0415

    cfg = _load_cfg(use_cli_args=False)
    for key, value in (table.get("config") or {}).items():
        OmegaConf.update(cfg, key, value, merge=True)
    models = env.start.run.get("models") or {}
    cfg.agent.code.model = models.get("main", "")
    cfg.agent.feedback.model = models.get("fast") or models.get("main", "")
    cfg.report.model = cfg.agent.code.model
    cfg.generate_report = False
    cfg.goal = env.start.research_problem
    metric = env.start.task.get("metric") or {}
    direction = "higher is better" if metric.get("higher_is_better", True) else "lower is better"
    cfg.eval = f"The task's evaluation scores the final workspace by {metric.get('name', 'its metric')} ({direction})."
    cfg.data_dir, cfg.exp_name = ".", "platform"
    cfg.log_dir = cfg.workspace_dir = "."
    return OmegaConf.merge(OmegaConf.structured(Config), cfg)


class Gateway:
    """AIDE's provider function (what ``backend.query`` calls with the compiled messages): the platform's gateway."""

    def __init__(self, env: Env) -> None:
        self.env = env

    def query(self, system_message: str | None, user_message: str | None, func_spec=None, **model_kwargs):
        from aide.backend.utils import opt_messages_to_list  # noqa: PLC0415

        messages = opt_messages_to_list(system_message, user_message)
        options = {k: v for k, v in model_kwargs.items() if k in ("temperature", "max_tokens") and v is not None}
        purpose = "code"
        if func_spec is not None:
            options |= {"tools": [func_spec.as_openai_tool_dict], "tool_choice": func_spec.openai_tool_choice_dict}
            purpose = "review"
        started = time.monotonic()
        answer = self.env.chat(messages, purpose=purpose, model=model_kwargs.get("model") or None, **options)
        output: Any = answer.get("text", "")
        calls = answer.get("tool_calls") or []
        if func_spec is not None and calls:
            function = calls[0].get("function", {})
            if function.get("name") == func_spec.name:
                output = json.loads(function.get("arguments") or "")  # as AIDE's OpenAI backend: a bad one raises
            else:
                print(f"Function name mismatch: expected {func_spec.name}, got {function.get('name')}", file=sys.stderr)
        latency = time.monotonic() - started
        return output, latency, answer.get("tokens_in", 0), answer.get("tokens_out", 0), {"model": model_kwargs}


def execution_result(observation: str, seconds: float, timeout: float):
    """What AIDE's interpreter returns for a run of its code, made from the platform's Execute Script observation:
    the output, the exception (the one its traceback names; TimeoutError at the time limit, RuntimeError for another
    limit, SystemExit for an exit code without a traceback; None when it ran through), and the line on its time."""
    import humanize  # noqa: PLC0415
    from aide.interpreter import ExecutionResult  # noqa: PLC0415

    output = observation.removeprefix(EXECUTED)
    exc_type = None
    first = observation.split("\n", 1)[0]
    if "did not finish:" in first and "time limit" in first:  # the platform stopped it at its time limit
        exc_type = "TimeoutError"
    elif "Traceback (most recent call last):" in output:
        tail = [line for line in output.rsplit("Traceback (most recent call last):", 1)[1].splitlines() if line]
        named = [EXCEPTION_RE.match(line) for line in tail if not line.startswith((" ", "\t"))]
        exc_type = next((m.group(1).rsplit(".", 1)[-1] for m in reversed(named) if m), "Exception")
    elif first.startswith("EnvError:"):  # stopped by another limit (memory, processes): AIDE's child "died"
        exc_type = "RuntimeError"
    elif re.search(r"\n\(The script exited with code -?\d+", output):  # sys.exit(n): AIDE's REPL sees SystemExit
        exc_type = "SystemExit"
    if exc_type == "TimeoutError":
        last = f"TimeoutError: Execution exceeded the time limit of {humanize.naturaldelta(timeout)}"
    else:
        last = (
            f"Execution time: {humanize.naturaldelta(seconds)} seconds (time limit is "
            f"{humanize.naturaldelta(timeout)})."
        )
    return ExecutionResult([output, last], seconds, exc_type, {} if exc_type else None, [] if exc_type else None)


class Search:
    """AIDE's agent, its journal, and the steps its nodes take in the workspace."""

    def __init__(self, env: Env, cfg: Any) -> None:
        import aide.backend as backend  # noqa: PLC0415
        from aide.agent import Agent  # noqa: PLC0415
        from aide.journal import Journal  # noqa: PLC0415
        from aide.utils.config import load_task_desc  # noqa: PLC0415

        self.env, self.cfg = env, cfg
        gateway = Gateway(env)
        backend.provider_to_query_func["platform"] = gateway.query
        backend.determine_provider = lambda model: "platform"
        self.journal = Journal()
        self.agent = Agent(task_desc=load_task_desc(cfg), cfg=cfg, journal=self.journal)
        self.agent.update_data_preview = self.data_preview
        for stage in ("_draft", "_debug", "_improve"):
            setattr(self.agent, stage, self._noting(getattr(self.agent, stage)))
        parse = self.agent.parse_exec_result
        self.agent.parse_exec_result = lambda node, exec_result: self._reviewed(parse, node, exec_result)
        self.node: Any = None  # the node being executed (AIDE's step makes it, then executes it)
        self.review: dict[str, str] = {}  # AIDE's review of the last node, for the next step's entries
        self.last_code: str | None = None  # the code the workspace's runfile.py holds, last executed
        self.last_started_at = 0.0  # when its run began (the clock files' times are on)

    def _noting(self, make):
        def made(*args):
            self.node = make(*args)
            return self.node

        return made

    def _reviewed(self, parse, node, exec_result) -> None:
        parse(node=node, exec_result=exec_result)
        verdict = "bug" if node.is_buggy else f"metric {node.metric.value}"
        self.review = {"Review": f"node {node.id[:8]}: {verdict}. {node.analysis or ''}".strip()}

    def act(self, action: str, action_input: dict, **entries: str):
        entries = {**self.review, **entries}
        self.review = {}
        observation = self.env.act(action, action_input, **entries)
        if observation.done:
            raise RunEnded("the run has ended")
        return observation

    def data_preview(self) -> None:
        """AIDE's folders laid out in the workspace and its data preview of them, made in the sandbox by its own
        code (``SETUP_SCRIPT``)."""
        thought = "AIDE's folders (input/, working/) and its data preview"
        self.act("Write File", {"file_name": SETUP_FILE, "content": SETUP_SCRIPT}, Thought=thought)
        shown = self.act("Execute Script", {"script_name": SETUP_FILE})
        self.agent.data_preview = shown.text.removeprefix(EXECUTED).strip()

    def execute(self, code: str, reset_session: bool = True):
        """AIDE's ``exec_callback``: the node's code run in the workspace."""
        node = self.node
        entries = {
            "Stage": node.stage_name,
            "Node": f"{node.id[:8]} (step {len(self.journal)})",
            "Parent": node.parent.id[:8] if node.parent is not None else "none",
            "Plan": node.plan or "",
        }
        self.act("Write File", {"file_name": RUNFILE, "content": code}, **entries)
        started, self.last_started_at = time.monotonic(), time.time()
        observation = self.act("Execute Script", {"script_name": RUNFILE}, Node=entries["Node"])
        self.last_code = code
        return execution_result(observation.text, time.monotonic() - started, float(self.cfg.exec.timeout))

    def run(self) -> None:
        started, longest = time.monotonic(), 0.0
        while len(self.journal) < self.cfg.agent.steps and self.room_for_a_node(started, longest):
            began = time.monotonic()
            self.agent.step(exec_callback=self.execute)
            longest = max(longest, time.monotonic() - began)
        self.finish()

    def room_for_a_node(self, started: float, longest: float) -> bool:
        """Whether the run's limits leave room for another node and still for the end (``finish``): the node's two
        steps, the best node's two if it must run again, the two that collect its outputs and the Final Answer; and,
        once a node has been timed, the longest node's time twice over (another node, the best one run again).
        AIDE's own loop counts only its steps: here the run's limits end it, and the best node must be what the
        task's eval scores."""
        limits = self.env.start.limits
        steps_left = (limits.get("max_steps") or 10**9) - self.env.steps_taken
        time_left = (limits.get("max_time_s") or 10**9) - (time.monotonic() - started)
        return steps_left >= 7 and time_left >= 2 * longest + 30

    def finish(self) -> None:
        """The best node's code in the workspace, run, what it wrote to ``working/`` brought to the root, and a Final
        Answer saying which node it is."""
        best = self.journal.get_best_node(only_good=False)
        if best is None:
            self.act("Final Answer", {"final_answer": "AIDE found no solution."})
            return
        if best.code != self.last_code:
            self.act("Write File", {"file_name": RUNFILE, "content": best.code}, Thought="AIDE's best node, run again")
            self.last_started_at = time.time()
            self.act("Execute Script", {"script_name": RUNFILE}, Node=best.id[:8])
        collect = COLLECT_SCRIPT.format(since=repr(self.last_started_at - 1.0))  # a second's leeway for the clocks
        self.act("Write File", {"file_name": COLLECT_FILE, "content": collect}, Thought="the best node's outputs")
        self.act("Execute Script", {"script_name": COLLECT_FILE})
        good = "" if best.is_buggy else f", metric {best.metric.value}"
        summary = (
            f"AIDE's best node {best.id[:8]} ({best.stage_name}{good}) of {len(self.journal)}; its code is {RUNFILE}."
        )
        self.act("Final Answer", {"final_answer": summary})


def run(env: Env) -> None:
    env.take_history()  # AIDE's journal lives in this process: a resumed run searches afresh from the workspace
    cfg = aide_config(env, env.start.config.get("aide") or {})
    try:
        Search(env, cfg).run()
    except LLMError as exc:
        print(f"AIDE stopped: a model call failed: {exc}", file=sys.stderr)
        raise


if __name__ == "__main__":
    main(run)
