"""A stand-in agent with the interface of MLAgentBench's agents: built from (args, env), run(env) until is_final."""

import json
import os
import re

import anthropic

from MLAgentBench import high_level_actions
from MLAgentBench.LLM import complete_text, complete_text_fast
from MLAgentBench.schema import Action


def initial_prompt(env, args):
    tools = "\n".join(
        f"- {name}: {info.description} {json.dumps(info.usage)}" for name, info in env.action_infos.items()
    )
    return f"Tools:\n{tools}\n\nProblem: {env.research_problem}\nRetries: {args.max_retries}\nAnswer: Action, Input.\n"


def summary(observation):
    """As MLAgentBench's research agent: a long observation summarised block by block, then the blocks merged."""
    if len(observation) <= 5000:
        return observation
    blocks = [observation[i : i + 10000] for i in range(0, len(observation), 10000)]
    parts = [complete_text_fast(f"Summarise block {n}: {block}", log_file=None) for n, block in enumerate(blocks)]
    return parts[0] if len(parts) == 1 else complete_text_fast("Merge: " + "\n".join(parts), log_file=None)


class StandInAgent:
    def __init__(self, args, env):
        self.args = args
        high_level_actions.EDIT_SCRIPT_MODEL = args.edit_script_llm_name  # as MLAgentBench's agent sets it
        self.prompt = initial_prompt(env, args)
        self.log_dir = os.path.join(args.log_dir, "agent_log")
        os.makedirs(self.log_dir, exist_ok=True)

    def run(self, env):
        prompt = self.prompt
        while not env.is_final():
            completion = complete_text(prompt, os.path.join(self.log_dir, "step.log"), self.args.llm_name)
            action = re.search(r"Action:\s*(.*)", completion).group(1).strip()
            action_input = json.loads(re.search(r"Action Input:\s*(\{.*\})", completion, re.DOTALL).group(1))
            observation = summary(env.execute(Action(action, action_input)))
            prompt += anthropic.AI_PROMPT + "\n" + completion + "\nObservation:\n" + observation + "\n"
        return "Finished: " + str(len(env.trace.steps)) + " steps"
