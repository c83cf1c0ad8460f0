"""The stand-in's model-backed actions, importing the model calls as MLAgentBench's module does."""

from .LLM import complete_text, complete_text_fast  # noqa: F401 - the adapter's, never the package's LLM.py
from .schema import ActionInfo

HIGH_LEVEL_ACTIONS = [
    ActionInfo(
        "Understand File",
        "Reads a file for you.",
        {"file_name": "a file", "things_to_look_for": "what"},
        "a summary",
        "understand_file",
    ),
]
