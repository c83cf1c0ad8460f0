"""The baseline agent: runs the starter script unchanged and submits. This is how a baseline is measured."""

from __future__ import annotations

from .sdk import Env, main


def run(env: Env) -> None:
    script = env.start.task.get("script") or "train.py"
    env.act(
        "List Files",
        {"dir_path": "."},
        Thought="Look at the files the task provides before running anything.",
    )
    observation = env.act(
        "Execute Script",
        {"script_name": script},
        Thought=f"Run the starter script {script} unchanged; its output is the baseline submission.",
    )
    outcome = "failed" if observation.error else "ran"
    env.act(
        "Final Answer",
        {"final_answer": f"The starter script {script} {outcome} unchanged; its output is the submission."},
        Thought="Submit the starter script's result as the baseline.",
    )


if __name__ == "__main__":
    main(run)
