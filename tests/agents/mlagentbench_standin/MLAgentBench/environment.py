"""The stand-in's environment class, shaped as MLAgentBench's: ``execute`` calls an action's function with the
arguments every action gets, turns its errors into observations of its own words, appends the step to the trace and
saves it. The adapter keeps this class's ``execute`` and ``is_final`` and puts the platform beneath them."""

import time

from dacite import from_dict  # noqa: F401 - as MLAgentBench's module imports it

from .LLM import complete_text_claude  # noqa: F401 - as MLAgentBench's module imports it
from .schema import EnvException, LLMError, Step, TooLongPromptError


class Environment:
    def __init__(self, args):
        raise RuntimeError("the adapter builds its own environment; this one prepares a folder on the disk")

    def is_final(self):
        finished = any(step.action.name == "Final Answer" for step in self.trace.steps)
        return finished or len(self.trace.steps) >= self.args.max_steps

    def execute(self, action):
        trace = self._trace  # as MLAgentBench's execute reads it
        if action.name == "Final Answer":
            observation = "end"
        elif action.name not in self.action_infos:
            observation = f"Stand-in: no action {action.name}"
        else:
            log_file = f"{self.log_dir}/tool_logs/step_{len(self.trace.steps)}_tool_log.log"
            try:
                observation = self.action_infos[action.name].function(
                    **action.args, log_file=log_file, trace=trace, **self.static_kwargs_for_tools
                )
            except TooLongPromptError:
                observation = "Stand-in: too long"
            except LLMError as e:
                observation = "Stand-in model error: " + e.message
            except EnvException as e:
                observation = "Stand-in EnvError: " + e.message
            except TypeError:
                observation = "Stand-in: bad input"
        trace.steps.append(Step(action, observation, time.time()))
        self.save(len(trace.steps) - 1)
        return observation

    def save(self, curr_step):
        raise RuntimeError("the adapter records steps with the platform")
