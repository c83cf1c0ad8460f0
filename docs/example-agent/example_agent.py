"""The smallest useful agent: look, run the starter script, submit."""

from mlab_agents.sdk import Env, main


def run(env: Env) -> None:
    script = env.start.task.get("script") or "train.py"
    source = env.act("Read File", {"file_name": script}, Thought=f"Read {script} before running it.")
    print(f"{script} has {len(source.text.splitlines())} lines")  # goes to the agent's log (stderr)
    result = env.act("Execute Script", {"script_name": script}, Thought="Run it to produce the submission.")
    env.act("Final Answer", {"final_answer": result.text[-300:]}, Thought="Submit what the script produced.")


if __name__ == "__main__":
    main(run)
