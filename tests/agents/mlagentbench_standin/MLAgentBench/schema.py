"""The stand-in's schema: the classes MLAgentBench's agents and actions exchange, by the same names and fields."""

from dataclasses import dataclass
from typing import Any


class TooLongPromptError(Exception):
    pass


class LLMError(Exception):
    pass


class EnvException(Exception):
    def __init__(self, message):
        self.message = message

    def __str__(self):
        return self.message


@dataclass(frozen=True)
class ActionInfo:
    name: str
    description: str
    usage: dict
    return_value: str
    function: Any
    is_primitive: bool = False


@dataclass(frozen=True)
class Action:
    name: str
    args: Any


@dataclass(frozen=True)
class Step:
    action: Action
    observation: str
    timestamp: float


@dataclass(frozen=True)
class Trace:
    steps: list
    low_level_steps: list
    action_infos: dict
    task_description: str
