"""The stand-in's primitive actions: descriptions of its own, by MLAgentBench's names and arguments."""

import readline  # noqa: F401 - as MLAgentBench's module imports it

from .schema import ActionInfo

LOW_LEVEL_ACTIONS = [
    ActionInfo("List Files", "Lists what a folder holds.", {"dir_path": "a folder"}, "the names", "list_files"),
    ActionInfo("Execute Script", "Runs a Python script.", {"script_name": "a script"}, "its output", "execute_script"),
    ActionInfo("Final Answer", "Gives the answer.", {"final_answer": "the answer"}, "nothing", "final", True),
]
