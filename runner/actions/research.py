"""High-level actions: they build on the low-level ones (recorded under their step) and, most of them, on an
LLM (the run's "fast" model, through the gateway; tokens counted to the run)."""

from __future__ import annotations

import re

from ..text import unified_diff
from .catalogue import (
    APPEND_FILE,
    APPEND_SUMMARY_TO_RESEARCH_LOG,
    EDIT_SCRIPT_AI,
    EDIT_SCRIPT_SEGMENT_AI,
    INSPECT_SCRIPT_LINES,
    READ_FILE,
    REFLECTION,
    RETRIEVAL_FROM_RESEARCH_LOG,
    UNDERSTAND_FILE,
    WRITE_FILE,
)
from .files import inspect_script_lines
from .types import ActionEnv, EnvError

RESEARCH_LOG = "research_log.log"
# As MLAgentBench asks its models: every completion stops at "Observation:", with the tokens and temperature its
# code sends the model (the endpoint's defaults: ModelEndpoint.completion_defaults); the fast model (reading a file,
# reflecting, retrieving) answers at 0.01, and the edit model may take 4,000 tokens. Understand File reads
# 10,000-character blocks.
COMPLETION_OPTIONS = {"stop": ["Observation:"]}
FAST_OPTIONS = {**COMPLETION_OPTIONS, "temperature": 0.01}
EDIT_OPTIONS = {**COMPLETION_OPTIONS, "max_tokens": 4000}
BLOCK_CHARS = 10_000
#: The opening fence of the code an editing model writes (```python, as it is asked for; ```py or a bare ``` too).
CODE_FENCE = re.compile(r"```(?:python|py)?")


def _log_text(env: ActionEnv) -> str:
    return env.low_read_or_empty(RESEARCH_LOG)


def append_summary_to_research_log(env: ActionEnv, content: str) -> str:
    env.low(APPEND_FILE, {"file_name": RESEARCH_LOG, "content": content.rstrip("\n") + "\n"})
    return "Successfully appended to research log"


def understand_file(env: ActionEnv, file_name: str, things_to_look_for: str) -> str:
    text = env.low(READ_FILE, {"file_name": file_name})
    lines = text.split("\n")
    blocks, current, start = [], [], 1
    for number, line in enumerate(lines, start=1):
        if current and sum(len(x) + 1 for x in current) + len(line) > BLOCK_CHARS:
            blocks.append((start, number - 1, "\n".join(current)))
            current, start = [], number
        current.append(line)
    blocks.append((start, len(lines), "\n".join(current)))
    descriptions = []
    for first, last, body in blocks:
        prompt = (
            f"Given this {'part of a ' if len(blocks) > 1 else ''}file ({file_name}, lines {first} to {last}):\n"
            f"```\n{body}\n```\n"
            f"Here is a detailed description of what to look for and what should be returned: {things_to_look_for}\n"
            "Keep the description short and refer to the critical lines of the file that are relevant to what is "
            "looked for. Only describe what the file content objectively confirms; do not guess numbers. If this "
            'part does not answer some of the request, say "In this segment, I cannot find ...".'
        )
        descriptions.append(env.ask(prompt, "understand file", FAST_OPTIONS))
    if len(descriptions) == 1:
        return descriptions[0]
    joined = "\n\n".join(f"Segment {i}:\n{d}" for i, d in enumerate(descriptions))
    return env.ask(
        "Given the relevant observations for each segment of a file, summarize them into one cohesive description "
        f"of the entire file on what to look for and what should be returned: {things_to_look_for}\n{joined}",
        "understand file",
        FAST_OPTIONS,
    )


def _edit(
    env: ActionEnv, script_name: str, save_name: str, source: str, lines: tuple[int, int] | None, instruction: str
) -> str:
    """Edit ``source`` (the script's text; with ``lines``, only those lines, first and last counted from 1) with the
    edit model, save it as ``save_name``, and show the diff of the source against what was saved."""
    parts = source.split("\n")
    first, last = lines if lines is not None else (1, len(parts))
    before, segment, after = ("\n".join(p) for p in (parts[: first - 1], parts[first - 1 : last], parts[last:]))
    env.check_writable(save_name)
    prompt = (
        f"Given this python script:\n```python\n{segment}\n```\n"
        f"Edit the script by following the instruction:\n{instruction}\n"
        'Provide the full code after the edit, making no other changes. Start the python code with "```python".'
    )
    completion = env.ask(prompt, "edit script", EDIT_OPTIONS)
    match = CODE_FENCE.search(completion)
    if match is None:
        raise EnvError(
            "the editing model did not return the edited code in a ```python block; nothing was changed. "
            "Try again with a more precise instruction."
        )
    # As MLAgentBench takes it: from the opening fence to the next one, or to the end of an answer cut off before
    # its closing fence (the model ran out of tokens): what was written is what the agent gets.
    new_segment = completion[match.end() :].split("```")[0].strip()
    new_content = "\n".join(part for part in (before, new_segment, after) if part != "")
    if not new_content.endswith("\n"):
        new_content += "\n"
    env.low(WRITE_FILE, {"file_name": save_name, "content": new_content})
    diff = unified_diff(source, new_content, script_name, save_name)
    return (
        f"The edited file is saved to {save_name}. Here is the diff, please check if the edit is correct and "
        f"desirable:\n\n{diff or '(no changes)'}"
    )


def edit_script(env: ActionEnv, script_name: str, edit_instruction: str, save_name: str) -> str:
    return _edit(env, script_name, save_name, env.low_read_or_empty(script_name), None, edit_instruction)


def edit_script_segment(
    env: ActionEnv,
    script_name: str,
    start_line_number: int,
    end_line_number: int,
    edit_instruction: str,
    save_name: str,
) -> str:
    content = env.low_read_or_empty(script_name)
    if not 1 <= start_line_number <= end_line_number:
        raise EnvError(
            f"the line numbers must satisfy 1 <= start_line_number <= end_line_number; got {start_line_number} "
            f"and {end_line_number}"
        )
    return _edit(env, script_name, save_name, content, (start_line_number, end_line_number), edit_instruction)


def reflection(env: ActionEnv, things_to_reflect_on: str) -> str:
    log = _log_text(env)
    prompt = (
        f"We are trying to solve this research problem: {env.research_problem}\n"
        f"Your current research log:\n```\n{log}\n```\n"
        f"Reflect on this: {things_to_reflect_on}\n"
        "Give an answer in natural language paragraphs as truthfully as possible."
    )
    return env.ask(prompt, "reflection", FAST_OPTIONS)


def retrieval_from_research_log(env: ActionEnv, current_plan: str) -> str:
    log = _log_text(env)
    prompt = (
        f"We are trying to solve this research problem: {env.research_problem}\n"
        f"Your current Research Plan and Status:\n{current_plan}\n\n"
        f"Your current research log:\n```\n{log}\n```\n"
        "Concisely summarize and list all the information from the research log that will help with the next "
        "steps, such as the baseline performance, the experiments that were tried and their results, and the "
        "errors that happened."
    )
    return env.ask(prompt, "retrieval", FAST_OPTIONS)


# Actions that need no LLM are always offered; the others only when the run has a model.
HANDLERS = {
    APPEND_SUMMARY_TO_RESEARCH_LOG: append_summary_to_research_log,
    INSPECT_SCRIPT_LINES: inspect_script_lines,
}
LLM_HANDLERS = {
    UNDERSTAND_FILE: understand_file,
    EDIT_SCRIPT_AI: edit_script,
    EDIT_SCRIPT_SEGMENT_AI: edit_script_segment,
    REFLECTION: reflection,
    RETRIEVAL_FROM_RESEARCH_LOG: retrieval_from_research_log,
}
