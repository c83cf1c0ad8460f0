"""The research agent of MLAgentBench: at every step the model answers with Reflection, Research Plan and
Status, Fact Check, Thought, Action and Action Input. The agent keeps the last few steps in its prompt (older
observations are left out), re-asks with a format reminder when an answer is malformed, has long observations
summarised by the fast model, and can keep a research log it retrieves from.

Configuration (the agent version's config): fast_model, history_window (3), max_retries (5),
summarize_over (5000 characters), retrieval (false), temperature (0.5), max_tokens (2000).
"""

from __future__ import annotations

import json
import re

from .sdk import Env, LLMError, main

ENTRIES = ["Reflection", "Research Plan and Status", "Fact Check", "Thought", "Action", "Action Input"]
DEFAULTS = {
    "fast_model": None,
    "history_window": 3,
    "max_retries": 5,
    "summarize_over": 5000,
    "retrieval": False,
    "temperature": 0.5,
    "max_tokens": 2000,
}

FORMAT = """Reflection: What does the observation mean? If there is an error, what caused it and how would you debug it?
Research Plan and Status: The full high level research plan, with the current status and the confirmed results of each step briefly noted. Only include progress made by previous steps. Mark new updates with double asterisks **like this**. If nothing changed, copy the previous Research Plan and Status. Keep the high level plan of the previous step unless you deliberately revise it.
Fact Check: List every objective statement in the updates to Research Plan and Status and say, for each, whether it is guessed or directly confirmed by the observation above. Performance numbers are confirmed only by running code and reading its output.
Thought: What you are doing now, which action you will take and why.
Action: The action to take; exactly one of the tool names.
Action Input: The input of the action, as a valid JSON object."""

INSTRUCTIONS = """Follow these instructions and do not forget them:
- First, come up with a high level plan based on your understanding of the problem and the available tools, and record it in the Research Plan and Status. You can revise the plan later.
- The Research Plan and Status should be well organised and succinctly track 1) the high level plan (can be revised), 2) which steps are done and which are in progress, 3) short results and conclusions of each step once it is done. Do not perform actions in the Research Plan and Status.
- The Research Plan and Status must only include progress made by previous steps, and no result that the previous observations do not directly confirm.
- Performance numbers and estimates can only be confirmed and included in the status by running the code and observing the output.
- Design experiments that address the problem and, whenever it applies, measure the baseline performance before trying improvements.
- Follow the plan and reach the goal as directly as possible.
- Highlight the supporting results and reasoning before drawing conclusions.
- Do not try to install new packages or libraries.
- When you believe the problem is solved, submit with the Final Answer action. You can only submit once, so make sure the goal is reached first."""


def tools_prompt(actions: list[dict]) -> str:
    parts = []
    for action in actions:
        usage = ",\n".join(f'    "{k}": [{v}]' for k, v in action["usage"].items())
        parts.append(
            f"- {action['name']}:\n    {action['description']}\n    Usage:\n    ```\n    Action: {action['name']}\n"
            f"    Action Input: {{\n{usage}\n    }}\n    Observation: [{action['return_value']}]\n    ```"
        )
    return "\n".join(parts)


def initial_prompt(env: Env) -> str:
    return (
        "You are a helpful research assistant. You have access to the following tools:\n"
        f"{tools_prompt(env.start.actions)}\n\n"
        f"Research Problem: {env.start.research_problem}\n\n"
        "You do not know anything about this problem so far.\n\n"
        f"{INSTRUCTIONS}\n\n"
        f"Always respond in this format exactly:\n{FORMAT}\nObservation:\n```\nthe result of the action\n```\n"
    )


class Malformed(Exception):
    pass


def parse_response(text: str, action_names: list[str]) -> dict[str, str]:
    """The six entries of a response, or Malformed saying what is missing or wrong."""
    text = text.split("\nObservation:")[0]
    pattern = re.compile(r"^\s*(" + "|".join(re.escape(e) for e in ENTRIES) + r")\s*:", re.MULTILINE)
    matches = list(pattern.finditer(text))
    entries: dict[str, str] = {}
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        entries.setdefault(match.group(1), text[match.end() : end].strip())
    missing = [e for e in ENTRIES if e not in entries]
    if missing:
        raise Malformed(f"the response is missing {', '.join(missing)}")
    action = entries["Action"].strip().strip("`").strip()
    if action not in action_names:
        raise Malformed(f"the action {action!r} is not one of the tools: {', '.join(action_names)}")
    entries["Action"] = action
    return entries


def parse_action_input(raw: str) -> dict:
    """Parse the Action Input JSON leniently: code fences, text around the object, raw newlines in strings."""
    raw = raw.strip()
    fence = re.match(r"^```(?:json)?\s*(.*?)\s*```$", raw, re.DOTALL)
    if fence:
        raw = fence.group(1)
    start, end = raw.find("{"), raw.rfind("}")
    if start < 0 or end < start:
        raise Malformed("the Action Input is not a JSON object")
    body = raw[start : end + 1]
    for candidate in (body, _escape_newlines_in_strings(body)):
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise Malformed("the Action Input is not valid JSON (check commas and quotes)")


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


class ResearchAgent:
    def __init__(self, env: Env) -> None:
        self.env = env
        self.config = DEFAULTS | env.start.config
        self.history: list[dict] = [
            {
                "entries": h.get("entries", {}),
                "action": h["action"],
                "input": h.get("input", {}),
                "observation": h.get("observation", ""),
            }
            for h in env.start.history
        ]
        self.research_log = ""

    def complete(self, prompt: str, *, purpose: str, fast: bool = False) -> str:
        options = {"temperature": self.config["temperature"], "max_tokens": self.config["max_tokens"]}
        if fast and self.config["fast_model"]:
            options["model"] = self.config["fast_model"]
        return self.env.complete([{"role": "user", "content": prompt}], purpose=purpose, **options)

    def prompt(self) -> str:
        parts = [initial_prompt(self.env)]
        if self.config["retrieval"] and self.research_log:
            plan = self.history[-1]["entries"].get("Research Plan and Status", "") if self.history else ""
            relevant = self.complete(
                f"Research problem: {self.env.start.research_problem}\nCurrent plan:\n{plan}\n\nResearch log:\n"
                f"```\n{self.research_log}\n```\nConcisely list the information from the log that matters for "
                "the next steps.",
                purpose="retrieval",
                fast=True,
            )
            parts.append(
                f"Here is a summary of relevant actions and observations you have done:\n```\n{relevant}\n```\n"
            )
        window = self.history[-self.config["history_window"] :] if self.config["history_window"] else []
        if window:
            parts.append(
                "Here are the exact several steps you have done most recently (up to "
                f"{self.config['history_window']} steps):\n"
            )
            for step in window:
                entries = "\n".join(f"{k}: {v}" for k, v in step["entries"].items() if k in ENTRIES)
                if "Action" not in step["entries"]:
                    entries += f"\nAction: {step['action']}\nAction Input: {json.dumps(step['input'])}"
                parts.append(f"{entries}\nObservation:\n```\n{step['observation']}\n```\n")
        return "\n".join(parts)

    def next_action(self) -> tuple[dict[str, str], dict]:
        """Ask the model until it answers in the format (at most max_retries extra times)."""
        prompt = self.prompt()
        problem = ""
        for _ in range(self.config["max_retries"] + 1):
            asked = (
                prompt
                if not problem
                else (
                    f"{prompt}\n\nYour previous answer could not be used: {problem}. Respond again, in this format "
                    f"exactly:\n{FORMAT}"
                )
            )
            text = self.complete(asked, purpose="agent")
            try:
                entries = parse_response(text, self.env.start.action_names)
                return entries, parse_action_input(entries["Action Input"])
            except Malformed as exc:
                problem = str(exc)
        # Still malformed: take the step anyway; the environment's error observation tells the model what failed.
        return {"Thought": f"(the model's answer could not be parsed: {problem})"}, {}

    def observe(self, text: str) -> str:
        if len(text) <= self.config["summarize_over"]:
            return text
        try:
            return self.complete(
                "Summarize this observation of an action concisely and objectively, keeping every number, "
                f"error message and file name that matters:\n```\n{text[:50_000]}\n```",
                purpose="summarize observation",
                fast=True,
            )
        except LLMError:
            return text[: self.config["summarize_over"]] + "\n[... the rest of the observation was cut ...]"

    def run(self) -> None:
        while True:
            entries, action_input = self.next_action()
            action = entries.get("Action", "")
            recorded = {k: v for k, v in entries.items() if k not in ("Action", "Action Input")}
            observation = self.env.act(action, action_input, **{k.replace(" ", "_"): v for k, v in recorded.items()})
            seen = self.observe(observation.text)
            self.history.append({"entries": entries, "action": action, "input": action_input, "observation": seen})
            if self.config["retrieval"]:
                summary = self.complete(
                    f"Summarize this step in a few lines for the research log:\nAction: {action}\nInput: "
                    f"{json.dumps(action_input)[:2000]}\nObservation:\n```\n{seen[:5000]}\n```",
                    purpose="research log",
                    fast=True,
                )
                self.research_log += f"\n[Step {observation.step}] {summary}\n"
            if observation.done:
                return


def run(env: Env) -> None:
    ResearchAgent(env).run()


if __name__ == "__main__":
    main(run)
