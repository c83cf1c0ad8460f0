"""The action catalogue: names, argument usage and return values as in MLAgentBench. Sent to agents."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ActionSpec:
    name: str
    description: str
    usage: dict[str, str]
    return_value: str
    is_primitive: bool = True
    int_args: frozenset[str] = field(default_factory=frozenset)

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "usage": self.usage,
            "return_value": self.return_value,
            "is_primitive": self.is_primitive,
        }


# The actions' names, as MLAgentBench spells them: agents call actions by these names.
LIST_FILES = "List Files"
READ_FILE = "Read File"
WRITE_FILE = "Write File"
APPEND_FILE = "Append File"
COPY_FILE = "Copy File"
UNDO_EDIT_SCRIPT = "Undo Edit Script"
EXECUTE_SCRIPT = "Execute Script"
PYTHON_REPL = "Python REPL"
FINAL_ANSWER = "Final Answer"
# Not an action: the step recorded for a line from the agent that is not a message of the protocol.
INVALID_MESSAGE = "Invalid Message"
UNDERSTAND_FILE = "Understand File"
APPEND_SUMMARY_TO_RESEARCH_LOG = "Append Summary to Research Log"
INSPECT_SCRIPT_LINES = "Inspect Script Lines"
EDIT_SCRIPT_AI = "Edit Script (AI)"
EDIT_SCRIPT_SEGMENT_AI = "Edit Script Segment (AI)"
REFLECTION = "Reflection"
RETRIEVAL_FROM_RESEARCH_LOG = "Retrieval from Research Log"

FILE_ARG = "a valid file name with relative path to current directory if needed"
SCRIPT_ARG = "a valid python script name with relative path to current directory if needed"

ACTIONS: list[ActionSpec] = [
    ActionSpec(
        LIST_FILES,
        "Use this to navigate the file system.",
        {"dir_path": 'a valid relative path to a directory, such as "." or "folder1/folder2"'},
        "The observation will be a list of files and folders in dir_path or current directory is dir_path is "
        "empty, or an error message if dir_path is invalid.",
    ),
    ActionSpec(
        READ_FILE,
        "Use this to read an existing file.",
        {"file_name": FILE_ARG},
        "The observation will be the contents of the file read.",
    ),
    ActionSpec(
        WRITE_FILE,
        "Use this to write a file. If the file already exists, it will be overwritten.",
        {"file_name": FILE_ARG, "content": "the content to be written to the file"},
        "A success message if the file is written successfully, or an error message if the file cannot be written.",
    ),
    ActionSpec(
        APPEND_FILE,
        "Use this to append a file to a new location with a new name.",
        {"file_name": FILE_ARG, "content": "the content to be appended to the file"},
        "A success message if the file is appended successfully, or an error message if the file cannot be appended.",
    ),
    ActionSpec(
        COPY_FILE,
        "Use this to copy a file to a new location with a new name.",
        {"source": FILE_ARG, "destination": FILE_ARG},
        "A success message if the file is copied successfully, or an error message if the file cannot be copied.",
    ),
    ActionSpec(
        UNDO_EDIT_SCRIPT,
        "Use this to undo the last edit of the python script.",
        {"script_name": SCRIPT_ARG},
        "The observation will be the content of the script before the last edit. If the script does not "
        "exist, the observation will be an error message.",
    ),
    ActionSpec(
        EXECUTE_SCRIPT,
        "Use this to execute the python script. The script must already exist.",
        {"script_name": SCRIPT_ARG},
        "The observation will be output of the script or errors.",
    ),
    ActionSpec(
        PYTHON_REPL,
        "A python REPL. Use this to execute single line python commands.",
        {"command": "a valid python command"},
        "The observation will be output of the command or errors.",
    ),
    ActionSpec(
        FINAL_ANSWER,
        # In MLAgentBench's sense: it gives the answer, and says nothing of when to give it (a warning that no
        # action can follow was never part of the benchmark, and would change when agents submit).
        "Use this to give your final answer to the task.",
        {"final_answer": "a detailed account of your final answer"},
        "The observation will be empty.",
    ),
    ActionSpec(
        UNDERSTAND_FILE,
        "Use this to read the whole file and understand certain aspects. You should provide detailed "
        "description on what to look for and what should be returned. To get a better understanding of the "
        "file, you can use Inspect Script Lines action to inspect specific part of the file.",
        {
            "file_name": FILE_ARG,
            "things_to_look_for": "a detailed description on what to look for and what should returned",
        },
        "The observation will be a description of relevant content and lines in the file. If the file does "
        "not exist, the observation will be an error message.",
        is_primitive=False,
    ),
    ActionSpec(
        APPEND_SUMMARY_TO_RESEARCH_LOG,
        "Append to the summary of previous step to research log",
        {"content": "a string within 500 character limit"},
        "The observation will be a success message if the content is appended to the research log. "
        "Otherwise, the observation will be an error message.",
        is_primitive=False,
    ),
    ActionSpec(
        INSPECT_SCRIPT_LINES,
        "Use this to inspect specific part of a python script precisely, or the full content of a short "
        "script. The number of lines to display is limited to 100 lines. This is especially helpful when "
        "debugging.",
        {
            "script_name": SCRIPT_ARG,
            "start_line_number": "a valid line number",
            "end_line_number": "a valid line number",
        },
        "The observation will be the content of the script between start_line_number and end_line_number . "
        "If the script does not exist, the observation will be an error message.",
        is_primitive=False,
        int_args=frozenset({"start_line_number", "end_line_number"}),
    ),
    ActionSpec(
        EDIT_SCRIPT_AI,
        "Use this to do a relatively large but cohesive edit over a python script. Instead of editing the "
        "script directly, you should describe the edit instruction so that another AI can help you do this.",
        {
            "script_name": SCRIPT_ARG + ". An empty sctipt will be created if it does not exist.",
            "edit_instruction": "a detailed step by step description on how to edit it.",
            "save_name": "a valid file name with relative path to current directory if needed",
        },
        "The observation will be the edited content of the script. If the script does not exist, the "
        "observation will be an error message. You should always double check whether the edit is correct. "
        "If it is far from correct, you can use the Undo Edit Script action to undo the edit.",
        is_primitive=False,
    ),
    ActionSpec(
        EDIT_SCRIPT_SEGMENT_AI,
        "Use this to do a relatively large but cohesive edit over a python script over a segment. Instead of "
        "editing the script directly, you should describe the edit instruction so that another AI can help "
        "you do this.",
        {
            "script_name": SCRIPT_ARG + ". An empty sctipt will be created if it does not exist.",
            "start_line_number": "a valid line number",
            "end_line_number": "a valid line number",
            "edit_instruction": "a detailed step by step description on how to edit it.",
            "save_name": "a valid file name with relative path to current directory if needed",
        },
        "The observation will be the edited content of the script. If the script does not exist, the "
        "observation will be an error message. You should always double check whether the edit is correct. "
        "If it is far from correct, you can use the Undo Edit Script action to undo the edit.",
        is_primitive=False,
        int_args=frozenset({"start_line_number", "end_line_number"}),
    ),
    ActionSpec(
        REFLECTION,
        "Use this to look over all the past steps and reflect. You should provide detailed description on "
        "what to reflect on and what should be returned.",
        {"things_to_reflect_on": "a detailed description on what to reflect on and what should be returned"},
        "The observation will be a the reflection.",
        is_primitive=False,
    ),
    ActionSpec(
        RETRIEVAL_FROM_RESEARCH_LOG,
        "Use this to retrieve relevant information from the research log. You should provide detailed "
        "description on what to look for and what should be returned.",
        {"current_plan": "a detailed description of the current research plan and status"},
        "The observation will be a description of relevant content and lines in the research log.",
        is_primitive=False,
    ),
]

BY_NAME = {spec.name: spec for spec in ACTIONS}


def usage_text(spec: ActionSpec) -> str:
    lines = ",\n".join(f'    "{k}": [{v}]' for k, v in spec.usage.items())
    return "{\n" + lines + "\n}"


def catalogue_for_agent(names: list[str] | None = None) -> list[dict]:
    return [spec.as_dict() for spec in ACTIONS if names is None or spec.name in names]
