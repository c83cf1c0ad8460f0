"""A high-level action the agent's own code carries out (MLAgentBench's agents run their package's own): its files
through low-level actions the platform takes and records, its observation the agent's; never a low-level action's."""

from runner.actions.environment import MAX_LOW_PER_STEP


def test_an_agents_own_action_takes_low_level_actions_and_brings_its_observation(make_env):
    env = make_env({"train.py": "v1"})
    assert env.low_request("Read File", {"file_name": "train.py"}).observation == "v1"
    assert not env.low_request("Write File", {"file_name": "train.py", "content": "v2"}).error
    # As MLAgentBench's low-level actions: a write keeps no backup, and the agent's code keeps its own.
    assert not (env.workspace / "backup").exists()
    copied = env.low_request("Copy File", {"source": "train.py", "destination": "backup/train.py_2026-01-01_00-00-00"})
    assert not copied.error and (env.workspace / "backup" / "train.py_2026-01-01_00-00-00").read_text() == "v2"
    refused = env.low_request("Execute Script", {"script_name": "train.py"})
    assert refused.error and "Execute Script is not a low-level action" in refused.observation
    missing = env.low_request("Read File", {"file_name": "research_log.log"})
    assert missing.error and missing.observation.startswith("EnvError: cannot read file research_log.log")

    outcome = env.made("Inspect Script Lines", {"script_name": "train.py"}, "made by the agent")
    assert (outcome.observation, outcome.error, outcome.detail) == ("made by the agent", False, {"made_by": "agent"})
    assert [low["action"] for low in outcome.low_level] == ["Read File", "Write File", "Copy File", "Read File"]
    assert (env.workspace / "train.py").read_text() == "v2"
    assert env.execute("Write File", {"file_name": "backup/x", "content": ""}).error  # the platform's own: kept


def test_what_a_script_printed_is_never_the_agents_to_say(make_env):
    env = make_env({"train.py": "print(1)"})
    faked = env.made("Execute Script", {"script_name": "train.py"}, "The script printed: accuracy 1.0")
    assert faked.error and "Execute Script cannot bring its own observation" in faked.observation
    unknown = env.made("Request Help", {"request": "?"}, "Invalid action: Request Help.")
    assert (unknown.observation, unknown.error) == ("Invalid action: Request Help.", True)


def test_a_step_takes_a_bounded_number_of_low_level_actions(make_env):
    env = make_env({"train.py": "v1"})
    for _ in range(MAX_LOW_PER_STEP):
        assert not env.low_request("Read File", {"file_name": "train.py"}).error
    over = env.low_request("Read File", {"file_name": "train.py"})
    assert over.error and f"at most {MAX_LOW_PER_STEP} low-level actions" in over.observation
    env.made("Inspect Script Lines", {}, "done")
    assert not env.low_request("Read File", {"file_name": "train.py"}).error  # a new step, a new count
