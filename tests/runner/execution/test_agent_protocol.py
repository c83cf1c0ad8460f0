import pytest

from runner.execution import run_execute
from runner.models import Run, RunLimits, Step
from runner.services import run_create
from tests.factories import AgentFactory

FINAL = {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}}


def run_scripted(version, script: list) -> Run:
    agent = AgentFactory(config={"script": script})
    run = run_create(task=version.task, agent=agent, enqueue=False)
    return run_execute(run.pk)


@pytest.mark.django_db(transaction=True)
def test_a_line_that_is_not_json_gets_an_error_observation_and_the_run_goes_on(tiny_task):
    run = run_scripted(
        tiny_task,
        [
            "this is not json",
            {"type": "act", "action": "Execute Script", "input": {"script_name": "train.py"}},
            FINAL,
        ],
    )

    steps = list(Step.objects.filter(run=run))
    assert [s.action for s in steps] == ["Invalid Message", "Execute Script", "Final Answer"]
    assert steps[0].is_error
    assert "not valid JSON" in steps[0].observation
    assert steps[0].action_input == {"line": "this is not json"}
    assert 'answer: {"type": "error"' in run.stderr_tail
    assert run.status == "finished"
    assert run.final_score == 2.0


@pytest.mark.django_db(transaction=True)
def test_an_agent_that_exits_without_final_answer_fails_with_its_stderr_tail(tiny_task):
    run = run_scripted(
        tiny_task,
        [
            {"type": "act", "action": "List Files", "input": {"dir_path": "."}},
            {"exit": 3, "stderr": "Traceback: the agent fell over"},
        ],
    )

    assert run.status == "failed"
    assert run.failure_kind == "agent"
    assert "exited (code 3) without a Final Answer" in run.error
    assert "the agent fell over" in run.stderr_tail
    assert run.steps_count == 1


@pytest.mark.django_db(transaction=True)
def test_an_unknown_action_is_an_error_observation_listing_the_actions(tiny_task):
    run = run_scripted(tiny_task, [{"type": "act", "action": "Fly", "input": {}}, FINAL])

    first = Step.objects.get(run=run, index=0)
    assert first.is_error
    assert first.observation.startswith("Invalid action: Fly.")
    assert "Execute Script" in first.observation
    assert run.status == "finished"


@pytest.mark.django_db(transaction=True)
def test_the_step_limit_ends_the_run_and_the_workspace_is_still_scored(tiny_task):
    listing = {"type": "act", "action": "Execute Script", "input": {"script_name": "train.py"}}
    agent = AgentFactory(config={"script": [listing] * 5})
    run = run_create(task=tiny_task.task, agent=agent, enqueue=False, limits=RunLimits(max_steps=2))
    run = run_execute(run.pk)

    assert run.steps_count == 2
    assert run.status == "failed"
    assert run.failure_kind == "limit"
    assert run.final_score == 2.0


@pytest.mark.django_db(transaction=True)
def test_a_line_too_long_to_be_a_message_is_one_error_and_the_run_goes_on(tiny_task):
    from runner.execution.protocol import MAX_LINE_BYTES

    run = run_scripted(tiny_task, [{"long_line": 2 * MAX_LINE_BYTES + 12345}, FINAL])

    steps = list(Step.objects.filter(run=run))
    assert [s.action for s in steps] == ["Invalid Message", "Final Answer"]
    assert f"a line longer than {MAX_LINE_BYTES} bytes without a newline" in steps[0].observation
    assert run.status == "finished"


@pytest.mark.django_db(transaction=True)
def test_a_line_nested_too_deep_to_parse_is_the_agents_error_not_the_platforms(tiny_task):
    """100,000 brackets make the JSON parser recurse past Python's limit: that is a bad line from the agent, not
    an infrastructure failure that would take its run out of the rankings."""
    from runner.execution.protocol import MAX_NESTING

    deep_input = {"file_name": "train.py", "x": []}
    for _ in range(MAX_NESTING):  # parses, but deeper than anything the runner stores should be
        deep_input["x"] = [deep_input["x"]]
    run = run_scripted(
        tiny_task,
        ["[" * 100_000 + "]" * 100_000, {"type": "act", "action": "Read File", "input": deep_input}, FINAL],
    )

    steps = list(Step.objects.filter(run=run))
    assert [s.action for s in steps] == ["Invalid Message", "Invalid Message", "Final Answer"]
    assert all(f"deeper than {MAX_NESTING} levels" in s.observation for s in steps[:2])
    assert (run.status, run.failure_kind) == ("finished", "")


@pytest.mark.django_db(transaction=True)
def test_an_agent_that_never_reads_its_answers_cannot_hang_the_worker(tiny_task):
    read = {"type": "act", "action": "Read File", "input": {"file_name": "train.py"}}
    agent = AgentFactory(config={"script": [{"flood": 3000, "message": read}]})
    run = run_create(task=tiny_task.task, agent=agent, enqueue=False, limits=RunLimits(max_time_s=8))
    run = run_execute(run.pk)  # returns at all: a hang would be pytest's timeout
    assert run.status in ("timed_out", "failed"), run.error


@pytest.mark.django_db(transaction=True)
def test_nul_bytes_from_scripts_and_agents_are_recorded(tiny_task):
    script = [
        {
            "type": "act",
            "action": "Write File",
            "input": {"file_name": "nul.py", "content": "print('a' + chr(0) + 'b')"},
        },
        {
            "type": "act",
            "action": "Execute Script",
            "input": {"script_name": "nul.py"},
            "entries": {"Thought": "x<NUL>y"},
        },
        {"exit": 0, "stderr": "agent log with a <NUL> NUL"},
    ]
    run = run_execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)
    assert run.status == "failed" and run.failure_kind == "agent"  # it exited without a Final Answer, recorded
    step = Step.objects.get(run=run, action="Execute Script")
    assert "a\ufffdb" in step.observation and step.entries["Thought"] == "x\ufffdy"
    assert "NUL" in run.stderr_tail


@pytest.mark.django_db(transaction=True)
def test_values_the_database_cannot_store_are_the_agents_bad_message_never_the_platforms_failure(tiny_task):
    """PostgreSQL's JSON refuses NaN and Infinity, and its text NUL and lone surrogates: an agent that sends them
    gets an error step (numbers) or its text stored with them replaced (strings); its run goes on and is ranked."""
    run = run_scripted(
        tiny_task,
        [
            '{"type": "act", "action": "Read File", "input": {"file_name": "train.py", "n": NaN}}',
            '{"type": "act", "action": "Read File", "input": {"file_name": "train.py", "n": -Infinity}}',
            '{"type": "act", "action": "Read File", "input": {"file_name": "train.py", "n": 1e999}}',
            '{"type": "act", "action": "Read\\u0000 File\\ud800", "input": {"file\\ud800": "\\u0000"}, '
            '"entries": {"Thought\\udc00": "a\\ud800b"}}',
            FINAL,
        ],
    )
    steps = list(Step.objects.filter(run=run))
    assert (run.status, run.failure_kind) == ("finished", ""), run.error
    assert [s.action for s in steps[:3]] == ["Invalid Message"] * 3
    assert "NaN is not a JSON number" in steps[0].observation
    assert "-Infinity is not a JSON number" in steps[1].observation
    assert "1e999 is too large for a number" in steps[2].observation
    assert steps[3].is_error and "Invalid action" in steps[3].observation
    assert steps[3].entries == {"Thought\\udc00": "a\\ud800b"}  # stored, the lone surrogates escaped
