"""The stand-in's high-level actions, built as MLAgentBench's are: its own prompts to the fast and edit models, the
files through the low-level functions it imports by name, an edit's backup with shutil."""

import datetime
import os
import shutil

from .LLM import complete_text, complete_text_fast  # the adapter's, never the package's LLM.py
from .low_level_actions import append_file, read_file, write_file
from .schema import ActionInfo, EnvException

EDIT_SCRIPT_MODEL = "a model of the package's own"


def understand_file(file_name, things_to_look_for, work_dir=".", **kwargs):
    text = read_file(file_name, work_dir=work_dir, **kwargs)
    prompt = f"Stand-in reading {file_name} ({len(text)} characters):\n{text}\nLook for: {things_to_look_for}"
    return complete_text_fast(prompt, log_file=kwargs["log_file"])


def reflection(things_to_reflect_on, work_dir=".", research_problem="", **kwargs):
    log = read_file("research_log.log", work_dir=work_dir, **kwargs)
    prompt = f"{research_problem}\n{log}\n{things_to_reflect_on}"
    return "Stand-in reflection: " + complete_text_fast(prompt, log_file=kwargs["log_file"])


def edit_script(script_name, edit_instruction, save_name, work_dir=".", **kwargs):
    content = read_file(script_name, work_dir=work_dir, **kwargs)
    prompt = f"Stand-in edit of:\n{content}\nInstruction: {edit_instruction}"
    completion = complete_text(prompt, log_file=kwargs["log_file"], model=EDIT_SCRIPT_MODEL)
    if "```" not in completion:
        raise EnvException("the model wrote no code")
    new_content = completion.split("```")[1]
    stamp = datetime.datetime.now().strftime("%Y%m%d%H%M%S")
    shutil.copyfile(os.path.join(work_dir, script_name), os.path.join(work_dir, "backup", f"{script_name}_{stamp}"))
    write_file(save_name, new_content, work_dir=work_dir, **kwargs)
    return f"Stand-in saved {save_name}"


def append_to_research_log(content, work_dir=".", **kwargs):
    append_file("research_log.log", content, work_dir=work_dir, **kwargs)
    return "Stand-in appended"


HIGH_LEVEL_ACTIONS = [
    ActionInfo(
        "Understand File",
        "Reads a file for you.",
        {"file_name": "a file", "things_to_look_for": "what"},
        "a summary",
        understand_file,
    ),
    ActionInfo("Reflection", "Thinks it over.", {"things_to_reflect_on": "what"}, "thoughts", reflection),
    ActionInfo(
        "Edit Script (AI)",
        "Edits a script.",
        {"script_name": "a script", "edit_instruction": "how", "save_name": "where"},
        "a note",
        edit_script,
    ),
    ActionInfo(
        "Append Summary to Research Log", "Notes something.", {"content": "the note"}, "a note", append_to_research_log
    ),
]
