"""The research agent of MLAgentBench, faithful to its code by default.

At every step the model answers with Reflection, Research Plan and Status, Fact Check, Thought, Action and
Action Input. What the agent does, with MLAgentBench's numbers (docs/agents.md lists where it differs):

- The prompt offers 8 of the 16 tools (MLAgentBench hides Read File, Write File, Append File, Python REPL, Edit
  Script Segment (AI) and both research-log tools, and Reflection unless retrieval is on); an answer may still
  name any tool the environment has.
- The prompt carries the last 3 steps (the answer, then its observation). With retrieval on and more steps done
  than the window holds, a retrieval from the research log comes first.
- Completions stop at "Observation:", with the tokens and temperature MLAgentBench's code sends the model (the
  endpoint's defaults: 500 tokens at 0.2 through the OpenAI API, 2,000 at 0.5 for the others), unless the config
  sets them; the fast model's answers are at 0.01.
- An answer without all six entries, in order, or naming no tool gets a notice naming every entry appended to
  the prompt, which is asked again: 5 attempts in all; after the 5th the agent stops without acting.
- An Action Input that does not parse, or does not have exactly the tool's arguments, is not acted on: the
  parsing error becomes the step's observation, and such steps leave the window once a later step parses.
- An observation over 5,000 characters is cut into 10,000-character blocks, each summarised by the fast model
  (then the summaries merged in one more call); the summary replaces it in the window.
- With retrieval on, after each step the fast model summarises it and the summary is appended to the research
  log (through the environment's Append Summary to Research Log action).

The fast model is the run's (start message: run.models.fast, set by whoever started the run), never the agent's.
Configuration (the agent version's config): history_window (3), observation_window (3),
max_retries (5 attempts per step), summarize_over (5000), summary_block (10000), retrieval (false),
temperature and max_tokens (the endpoint's), fast_temperature (0.01), agent_max_steps (50),
actions_remove_from_prompt ([]), actions_add_to_prompt ([]).
"""

from __future__ import annotations

import json
import re
import sys

from .sdk import Env, LLMError, main

ENTRIES = ["Reflection", "Research Plan and Status", "Fact Check", "Thought", "Action", "Action Input"]
STOP = ["Observation:"]
# Tools MLAgentBench leaves out of the prompt (the environment still accepts them).
HIDDEN_TOOLS = [
    "Read File",
    "Write File",
    "Append File",
    "Retrieval from Research Log",
    "Append Summary to Research Log",
    "Python REPL",
    "Edit Script Segment (AI)",
]
HIDDEN_WITHOUT_RETRIEVAL = ["Reflection"]
PARSING_ERROR = "ActionInputParsingError"
DEFAULTS = {
    "history_window": 3,
    "observation_window": 3,
    "max_retries": 5,
    "summarize_over": 5000,
    "summary_block": 10_000,
    "retrieval": False,
    "temperature": None,  # the endpoint's default: what MLAgentBench sends the model
    "fast_temperature": 0.01,
    "max_tokens": None,
    "agent_max_steps": 50,
    "actions_remove_from_prompt": [],
    "actions_add_to_prompt": [],
}

ENTRY_HELP = {
    "Reflection": "What the last observation tells you; if something went wrong, what caused it and how you "
    "would track it down.",
    "Research Plan and Status": "The whole high-level research plan, with where each step stands and its "
    "confirmed results noted in a few words. Include only progress that earlier steps made. Put anything new "
    "between double asterisks **like this**; when nothing changed, repeat the previous Research Plan and Status "
    "as it was. Keep the previous high-level plan in full unless you revise it on purpose.",
    "Fact Check": "Take each objective statement in the updates to Research Plan and Status in turn and say "
    "whether it is a guess or confirmed directly by the observation just above. Performance numbers count as "
    "confirmed only when running code printed them.",
    "Thought": "What you are doing right now, which action comes next and why.",
    "Action": "The action to take: the name of one of the tools.",
    "Action Input": "The input of the action, written as valid JSON.",
}

RULES = """Keep to these rules the whole time:
- Start by drafting a high-level plan from what you understand of the problem and the tools, and write it in the Research Plan and Status. You may change the plan later.
- Keep the Research Plan and Status tidy and short. It tracks 1) the high-level plan, which may be revised, 2) the steps that are finished and the ones under way, 3) a brief result and conclusion for each finished step.
- The Research Plan and Status holds only progress made by earlier steps, and no result that the last observation did not confirm directly.
- A performance number or estimate may enter the status only after you ran the code and saw it in the output.
- Design experiments that answer the problem; where it applies, settle on and measure the baseline of the system or model concerned before you try to improve on it.
- Keep to the plan and take the most direct route to the goal.
- Set out the experimental results and the reasoning behind a conclusion before you draw it.
- Do not install any new packages or libraries.
- When you believe the problem is solved, submit with the Final Answer action. There is one submission only, so make sure the goal is met first."""


def prompt_tools(actions: list[dict], config: dict) -> list[dict]:
    """The tools the prompt offers: MLAgentBench's selection, in the environment's order."""
    hidden = set(HIDDEN_TOOLS) | set(config["actions_remove_from_prompt"])
    if not config["retrieval"]:
        hidden |= set(HIDDEN_WITHOUT_RETRIEVAL)
    shown = [a for a in actions if a["name"] not in hidden]
    by_name = {a["name"]: a for a in actions}
    shown += [by_name[n] for n in config["actions_add_to_prompt"] if n in by_name and by_name[n] not in shown]
    return shown


def usage_text(action: dict) -> str:
    return "{\n" + ",\n".join(f'    "{k}": [{v}]' for k, v in action["usage"].items()) + "\n}"


def tools_prompt(actions: list[dict]) -> str:
    parts = []
    for action in actions:
        usage = usage_text(action).replace("\n", "\n    ")
        parts.append(
            f"- {action['name']}:\n    {action['description']}\n    Usage:\n    ```\n    Action: {action['name']}\n"
            f"    Action Input: {usage}\n    Observation: [{action['return_value']}]\n    ```"
        )
    return "\n\n".join(parts)


def initial_prompt(env: Env, tools: list[dict]) -> str:
    answer_format = "\n".join(f"{entry}: {ENTRY_HELP[entry]}" for entry in ENTRIES)
    return (
        "You are a research assistant with these tools at hand:\n"
        f"{tools_prompt(tools)}\n\n"
        f"Research Problem: {env.start.research_problem}\n\n"
        "You know nothing about this problem yet.\n\n"
        f"{RULES}\n\n"
        f"Answer every time in exactly this shape:\n{answer_format}\nObservation:\n```\nthe result of the action\n```\n"
    )


def format_notice() -> str:
    return (
        "\n\nThat answer was not in the required shape. Answer again, with every one of these entries: "
        f"{', '.join(ENTRIES)}\n\n"
    )


class Malformed(Exception):
    pass


ENTRIES_PATTERN = re.compile("".join(re.escape(entry) + r":([\s\S]*)" for entry in ENTRIES))


def parse_response(text: str, action_names: list[str]) -> dict[str, str]:
    """The six entries of an answer, which must all be there in order, and name a tool; or Malformed."""
    text = text.split("\nObservation:")[0]  # an endpoint that ignores the stop sequence
    match = ENTRIES_PATTERN.search(text)
    if match is None:
        raise Malformed("the answer does not have all six entries in order")
    entries = {entry: value.strip() for entry, value in zip(ENTRIES, match.groups(), strict=True)}
    if entries["Action"] not in action_names:
        raise Malformed(f"the action {entries['Action']!r} is not one of the tools")
    return entries


def parse_action_input(raw: str, action: dict) -> dict:
    """The Action Input as a dict with exactly the tool's arguments, read leniently (code fences, text around
    the object, raw newlines inside strings); or Malformed."""
    raw = raw.strip()
    fence = re.match(r"^```(?:json)?\s*(.*?)\s*```$", raw, re.DOTALL)
    if fence:
        raw = fence.group(1)
    start, end = raw.find("{"), raw.rfind("}")
    if start < 0 or end < start:
        raise Malformed("no JSON object was found")
    body = raw[start : end + 1]
    try:
        try:
            value = json.loads(body)
        except json.JSONDecodeError as exc:
            try:
                value = json.loads(_escape_newlines_in_strings(body))
            except json.JSONDecodeError:
                raise Malformed(f"not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise Malformed("the JSON is not an object")
        if set(value) != set(action["usage"]):
            raise Malformed(f"the arguments are {sorted(value)}, not {sorted(action['usage'])}")
        return value
    except Malformed:
        found = _arguments_in_order(body, list(action["usage"]))
        if found is None:
            raise
        return found


def _arguments_in_order(body: str, names: list[str]) -> dict | None:
    """The fallback MLAgentBench's agent has for an input JSON cannot read (quotes inside a value, a value in
    triple quotes): each argument's value is the text from its key up to the next argument's key (the last such
    key, as a greedy match finds it) or the end of the object, stripped of spaces and of the quotes around it, as
    text. None when the keys are not all there, in order."""
    inner = body.strip()[1:-1]
    keys = r",\s*".join(f'"{re.escape(name)}":([\\s\\S]*)' for name in names)
    match = re.search(keys, inner)
    if match is None:
        return None
    return {name: value.strip().strip('"') for name, value in zip(names, match.groups(), strict=True)}


def _escape_newlines_in_strings(text: str) -> str:
    out, in_string, escaped = [], False, False
    for ch in text:
        if in_string and ch == "\n":
            out.append("\\n")
            continue
        out.append(ch)
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            in_string = not in_string
    return "".join(out)


def parsing_error_observation(error: str, action: dict) -> str:
    return (
        f"{PARSING_ERROR}: {error}\nThe input of {action['name']} has to be valid JSON with exactly the entries "
        "below. A comma missing between entries, or triple quotes (JSON has none), are the usual causes. Fix the "
        f"input and try again:\n{usage_text(action)}"
    )


def response_text(entries: dict[str, str]) -> str:
    """An earlier answer as the window shows it: the entries, with the plan's ** update marks taken out."""
    shown = dict(entries)
    if "Research Plan and Status" in shown:
        shown["Research Plan and Status"] = shown["Research Plan and Status"].strip("`").replace("**", "")
    return "\n".join(f"{entry}: {shown[entry]}" for entry in ENTRIES if entry in shown)


class ResearchAgent:
    def __init__(self, env: Env) -> None:
        self.env = env
        self.config = DEFAULTS | env.start.config
        self.actions = {a["name"]: a for a in env.start.actions}
        self.initial_prompt = initial_prompt(env, prompt_tools(env.start.actions, self.config))
        self.history: list[dict] = []
        for step in env.take_history():  # a resumed or forked run
            entries = dict(step.get("entries") or {})
            if not entries and step["action"] in ("Retrieval from Research Log", "Append Summary to Research Log"):
                continue  # the agent's own research-log bookkeeping, not a step of its
            entries.setdefault("Action", step["action"])
            entries.setdefault("Action Input", json.dumps(step.get("input", {})))
            self.history.append({"entries": entries, "observation": step.get("observation", "")})

    def complete(self, prompt: str, *, purpose: str, fast: bool = False) -> str:
        options = {
            "temperature": self.config["fast_temperature" if fast else "temperature"],
            "max_tokens": self.config["max_tokens"],
            "stop": STOP,
        }
        fast_model = (self.env.start.run.get("models") or {}).get("fast")
        if fast and fast_model:
            options["model"] = fast_model
        return self.env.complete([{"role": "user", "content": prompt}], purpose=purpose, **options)

    def prompt(self) -> str:
        done = len(self.history)
        window, seen = self.config["history_window"], self.config["observation_window"]
        prompt = self.initial_prompt
        if done > window:
            if self.config["retrieval"]:
                relevant = self.env.act("Retrieval from Research Log", {"current_plan": ""}).text
                prompt += (
                    f"\nA summary of the relevant actions you took and what you observed:\n```\n{relevant}\n```\n"
                    f"Your most recent steps, exactly as they were (up to {window}):\n"
                )
        else:
            prompt += "\nThe work starts here.\n\n"
        for index in range(max(done - window, 0), done):
            step = self.history[index]
            prompt += response_text(step["entries"]) + "\nObservation:"
            if done - index > seen:
                prompt += " (left out)\n\n"
            else:
                prompt += f"\n```\n{step['observation']}\n```\n\n"
        return prompt

    def next_entries(self, prompt: str) -> dict[str, str] | None:
        """Ask until an answer has the format: max_retries attempts, a notice appended after each failure."""
        discarded: list[str] = []
        for _ in range(self.config["max_retries"]):
            text = self.complete(prompt, purpose="agent")
            try:
                return parse_response(text, self.env.start.action_names)
            except Malformed as exc:
                if text in discarded:
                    print(
                        f"Step {len(self.history)}: the same answer as attempt {discarded.index(text) + 1}: the "
                        "endpoint seems to ignore temperature (greedy decoding).",
                        file=sys.stderr,
                    )
                else:
                    print(f"Step {len(self.history)}: the answer was discarded ({exc}):\n{text}", file=sys.stderr)
                discarded.append(text)
                prompt += format_notice()
        return None

    def summarize_observation(self, entries: dict[str, str], observation: str) -> str:
        size = self.config["summary_block"]
        blocks = [observation[i : i + size] for i in range(0, len(observation), size)]
        ask = (
            "Summarise it briefly, in this shape:\n[Observation]: every relevant detail of the observation, stated "
            "objectively\n\nLeave out anything guessed rather than confirmed directly by the observation, and add "
            "no other information or advice.\n"
        )
        answer = response_text(entries)
        summaries = []
        for index, block in enumerate(blocks):
            first = size * index + 1
            summaries.append(
                self.complete(
                    f"{answer}\n\nThe observation of this action is too long to show whole. Here is a part of it, "
                    f"from character {first} to character {first + len(block)}:\n```\n{block}\n```\n{ask}",
                    purpose="summarize observation",
                    fast=True,
                )
            )
        if len(summaries) == 1:
            summary = summaries[0]
        else:
            parts = "\n\n".join(f"Part {n}:\n\n{s}" for n, s in enumerate(summaries, start=1))
            summary = self.complete(
                f"{answer}\n\nThe observation of this action is too long to show whole. Here are summaries of its "
                f"parts, in order; combine them into one coherent description of the whole observation.\n{parts}\n\n"
                f"{ask}",
                purpose="summarize observation",
                fast=True,
            )
        pieces = summary.split("[Observation]:")
        return pieces[1] if len(pieces) > 1 else summary

    def log_step(self, step_number: int) -> None:
        """Summarise the last step with the fast model and append it to the research log."""
        step = self.history[-1]
        summary = "(no summary could be made of this step)"
        for _ in range(self.config["max_retries"]):
            try:
                text = self.complete(
                    f"Here is an action you took and what you observed:\n{response_text(step['entries'])}\n"
                    f"[Observation]:\n```\n{step['observation']}\n```\nSummarise the action and the observation in "
                    "this shape:\n[Reasoning]: the reasoning behind the action, in brief\n[Action]: every relevant "
                    "detail of the action, stated objectively\n[Observation]: every relevant detail of the "
                    "observation, stated objectively\nLeave out anything guessed rather than confirmed directly "
                    "by the observation, and add no other information or advice.\n",
                    purpose="research log",
                    fast=True,
                )
                summary = "[Reasoning]:" + text.split("[Reasoning]:")[1]
                break
            except (IndexError, LLMError) as exc:
                print(f"The research log summary failed ({exc!r}); trying again.", file=sys.stderr)
        self.env.act("Append Summary to Research Log", {"content": f"\n\nStep {step_number}:\n{summary}\n"})

    def run(self) -> None:
        while len(self.history) < self.config["agent_max_steps"]:
            step_number = len(self.history)
            entries = self.next_entries(self.prompt())
            if entries is None:
                print(
                    f"No answer in the format after {self.config['max_retries']} attempts: stopping.", file=sys.stderr
                )
                return
            action = self.actions[entries["Action"]]
            done = False
            try:
                action_input = parse_action_input(entries["Action Input"], action)
            except Malformed as exc:
                observation = parsing_error_observation(str(exc), action)
            else:
                recorded = {k.replace(" ", "_"): v for k, v in entries.items() if k not in ("Action", "Action Input")}
                result = self.env.act(action["name"], action_input, **recorded)
                observation, done = result.text, result.done
            if len(observation) > self.config["summarize_over"]:
                observation = self.summarize_observation(entries, observation)
            self.history.append({"entries": entries, "observation": observation})
            if not observation.startswith(PARSING_ERROR):
                self.history = [s for s in self.history if not s["observation"].startswith(PARSING_ERROR)]
            if done:
                return
            if self.config["retrieval"]:
                self.log_step(step_number)


def run(env: Env) -> None:
    ResearchAgent(env).run()


if __name__ == "__main__":
    main(run)
