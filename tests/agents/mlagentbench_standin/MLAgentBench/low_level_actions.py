"""The stand-in's primitive actions: descriptions of its own, by MLAgentBench's names and arguments. Their functions
touch the folder they are given; the adapter never calls them (the platform carries low-level actions out)."""

import os
import readline  # noqa: F401 - as MLAgentBench's module imports it

from .schema import ActionInfo, EnvException


def read_file(file_name, work_dir=".", **kwargs):
    try:
        return open(os.path.join(work_dir, file_name)).read()
    except OSError:
        raise EnvException(f"no file {file_name}") from None


def write_file(file_name, content, work_dir=".", **kwargs):
    with open(os.path.join(work_dir, file_name), "w") as fh:
        fh.write(content)
    return f"wrote {file_name}"


def append_file(file_name, content, work_dir=".", **kwargs):
    with open(os.path.join(work_dir, file_name), "a") as fh:
        fh.write(content)
    return f"appended to {file_name}"


def never_here(**kwargs):
    raise RuntimeError("the stand-in's own low-level function was called in the agent's process")


LOW_LEVEL_ACTIONS = [
    ActionInfo("List Files", "Lists what a folder holds.", {"dir_path": "a folder"}, "the names", never_here),
    ActionInfo("Execute Script", "Runs a Python script.", {"script_name": "a script"}, "its output", never_here),
    ActionInfo("Request Help", "Asks a person.", {"request": "the question"}, "their answer", never_here),
    ActionInfo("Final Answer", "Gives the answer.", {"final_answer": "the answer"}, "nothing", never_here, True),
]
