"""The LLM-backed actions, with a scripted model behind the real gateway."""

import pytest

from runner.actions import Environment
from runner.execution.sandboxes import get_sandbox, sandbox_python
from runner.llm.gateway import complete
from runner.models import LLMCall, Run
from tests.factories import AgentFactory, RunFactory


@pytest.fixture
def env(tmp_path, tiny_task, endpoint):
    run = RunFactory(task_version=tiny_task, agent=AgentFactory(), status=Run.Status.RUNNING, model="test-model")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "train.py").write_text("EPOCHS = 1\nprint('training')\n")

    def llm(messages, purpose, options):
        return complete(run=run, messages=messages, step_index=0, purpose=purpose, options=options).text

    environment = Environment(
        workspace=workspace, sandbox=get_sandbox(), python=sandbox_python(), llm=llm, research_problem="Train better."
    )
    environment.run = run
    return environment


def test_edit_script_writes_the_edited_code_and_shows_the_diff(env, llm_server):
    llm_server.script = ["Here it is:\n```python\nEPOCHS = 10\nprint('training')\n```\n"]

    outcome = env.execute(
        "Edit Script (AI)",
        {"script_name": "train.py", "edit_instruction": "train for 10 epochs", "save_name": "train.py"},
    )

    assert (env.workspace / "train.py").read_text() == "EPOCHS = 10\nprint('training')\n"
    assert "-EPOCHS = 1\n+EPOCHS = 10" in outcome.observation
    assert [s["action"] for s in outcome.low_level] == ["Read File", "Write File"]
    request = llm_server.requests[0]
    # The edit's 4,000 tokens, at the temperature MLAgentBench sends the model.
    assert (request["max_tokens"], request["temperature"], request["stop"]) == (4000, 0.2, ["Observation:"])
    assert "train for 10 epochs" in llm_server.requests[0]["messages"][0]["content"]
    # The edit can be undone.
    env.execute("Undo Edit Script", {"script_name": "train.py"})
    assert (env.workspace / "train.py").read_text().startswith("EPOCHS = 1\n")


def test_edit_script_segment_changes_only_the_segment(env, llm_server):
    (env.workspace / "train.py").write_text("a = 1\nb = 2\nc = 3\n")
    llm_server.script = ["```python\nb = 20\n```"]

    env.execute(
        "Edit Script Segment (AI)",
        {
            "script_name": "train.py",
            "start_line_number": 2,
            "end_line_number": 2,
            "edit_instruction": "b should be 20",
            "save_name": "new.py",
        },
    )

    assert (env.workspace / "new.py").read_text() == "a = 1\nb = 20\nc = 3\n"
    assert "b = 2" in llm_server.requests[0]["messages"][0]["content"]
    assert "a = 1" not in llm_server.requests[0]["messages"][0]["content"]


def test_an_edit_without_code_changes_nothing_and_says_why(env, llm_server):
    llm_server.script = ["Sorry, I cannot do that."]
    outcome = env.execute(
        "Edit Script (AI)", {"script_name": "train.py", "edit_instruction": "x", "save_name": "train.py"}
    )
    assert outcome.error and "did not return the edited code" in outcome.observation
    assert (env.workspace / "train.py").read_text() == "EPOCHS = 1\nprint('training')\n"


def test_an_edit_cut_off_before_its_closing_fence_is_written_as_it_is_and_diffed_against_the_source(env, llm_server):
    """As MLAgentBench takes the edit model's answer: from the opening fence to the next or to the end; the diff
    shown is the source script against what was saved, whatever the destination held before."""
    (env.workspace / "other.py").write_text("print('something else entirely')\n")
    llm_server.script = ["```python\nEPOCHS = 3\nprint('training')\nfor epoch in range(EPOCHS"]  # out of tokens

    outcome = env.execute(
        "Edit Script (AI)",
        {"script_name": "train.py", "edit_instruction": "train for 3 epochs", "save_name": "other.py"},
    )

    assert (env.workspace / "other.py").read_text() == "EPOCHS = 3\nprint('training')\nfor epoch in range(EPOCHS\n"
    assert "--- train.py\n+++ other.py\n" in outcome.observation
    assert "-EPOCHS = 1\n+EPOCHS = 3" in outcome.observation and "something else" not in outcome.observation


def test_understand_file_asks_about_each_block_and_combines(env, llm_server):
    (env.workspace / "big.txt").write_text("\n".join(f"row {i} " + "x" * 90 for i in range(300)))
    llm_server.default = "a description"

    outcome = env.execute("Understand File", {"file_name": "big.txt", "things_to_look_for": "the rows"})

    assert outcome.observation == "a description"
    assert len(llm_server.requests) == 4  # 3 blocks of at most 10,000 characters, then one summary
    for request in llm_server.requests:
        assert (request["max_tokens"], request["temperature"], request["stop"]) == (
            500,
            0.01,
            ["Observation:"],
        )  # the model's tokens, at 0.01
    assert "Segment 0:" in llm_server.requests[-1]["messages"][0]["content"]
    assert LLMCall.objects.filter(run=env.run, purpose="understand file").count() == 4


def test_research_log_append_reflect_and_retrieve(env, llm_server):
    env.execute("Append Summary to Research Log", {"content": "Baseline accuracy is 0.75."})
    llm_server.script = ["reflected", "retrieved"]

    assert env.execute("Reflection", {"things_to_reflect_on": "what next?"}).observation == "reflected"
    assert env.execute("Retrieval from Research Log", {"current_plan": "tune"}).observation == "retrieved"

    assert (env.workspace / "research_log.log").read_text() == "Baseline accuracy is 0.75.\n"
    for request in llm_server.requests:
        assert "Baseline accuracy is 0.75." in request["messages"][0]["content"]
        assert "Train better." in request["messages"][0]["content"]


def test_without_a_model_the_llm_actions_are_not_offered(make_env):
    env = make_env()
    assert "Edit Script (AI)" not in env.action_names
    assert "Append Summary to Research Log" in env.action_names
    outcome = env.execute("Reflection", {"things_to_reflect_on": "x"})
    assert outcome.observation.startswith("Invalid action: Reflection.")


def test_llm_action_errors_are_observations(env, llm_server):
    bad_lines = env.execute(
        "Edit Script Segment (AI)",
        {
            "script_name": "train.py",
            "start_line_number": 3,
            "end_line_number": 1,
            "edit_instruction": "x",
            "save_name": "train.py",
        },
    )
    assert bad_lines.error and "start_line_number <= end_line_number" in bad_lines.observation
    missing = env.execute("Understand File", {"file_name": "nope.txt", "things_to_look_for": "x"})
    assert missing.error and "cannot read file nope.txt" in missing.observation
    assert llm_server.requests == []  # nothing was asked of the model


@pytest.mark.django_db(transaction=True)
def test_a_model_that_refuses_the_request_is_an_error_observation_and_the_run_goes_on(tiny_task, endpoint, llm_server):
    from runner.execution import run_execute
    from runner.models import Step
    from runner.services import run_create

    script = [
        {"type": "act", "action": "Reflection", "input": {"things_to_reflect_on": "what next?"}},
        {"type": "act", "action": "Write File", "input": {"file_name": "value.txt", "content": "4"}},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]
    llm_server.script = [{"status": 400, "content": "the prompt is too long for this model"}]
    agent = AgentFactory(config={"script": script})
    run = run_execute(run_create(task=tiny_task.task, agent=agent, model="test-model", enqueue=False).pk)

    assert run.status == "finished" and run.final_score == 4.0
    reflection = Step.objects.get(run=run, action="Reflection")
    assert reflection.is_error
    assert "the LLM call failed" in reflection.observation and "too long for this model" in reflection.observation
    assert len(llm_server.requests) == 1  # a refused request is not retried
