"""The built-in research agent behaves as MLAgentBench's research agent does: what it asks the model (tools,
stop sequence, sampling, history window, format notices), when it gives up, how it summarises long
observations, which steps it drops and how it keeps its research log. Driven through run_execute with the real
sandbox and the real gateway, against a scripted model; the requests the model received are checked."""

import json

import pytest

from mlab_agents.research import Malformed, parse_action_input
from runner.agents.builtin import agents_builtin_ensure
from runner.execution import run_execute
from runner.models import Agent, LLMCall, ModelEndpoint, RunLimits, Step
from runner.services import run_create
from runner.workspace.snapshots import BlobStore

ENTRIES = "Reflection, Research Plan and Status, Fact Check, Thought, Action, Action Input"
PROMPT_TOOLS = [
    "List Files",
    "Copy File",
    "Undo Edit Script",
    "Execute Script",
    "Final Answer",
    "Understand File",
    "Inspect Script Lines",
    "Edit Script (AI)",
]
START = "\nThe work starts here.\n\n"


def answer(action: str, action_input: dict | str, thought: str) -> str:
    raw = action_input if isinstance(action_input, str) else json.dumps(action_input)
    return (
        f"Reflection: the observation is as expected.\nResearch Plan and Status: 1. **{thought}**\n"
        f"Fact Check: nothing new\nThought: {thought}\nAction: {action}\nAction Input: {raw}"
    )


LINES = {"script_name": "train.py", "start_line_number": "1", "end_line_number": "2"}


def window_block(reply: str, observation: str) -> str:
    """How an earlier step appears in the prompt: the answer (update marks taken out), then its observation."""
    return f"{reply.replace('**', '')}\nObservation:\n```\n{observation}\n```\n\n"


def tools_offered(prompt: str) -> list[str]:
    head = prompt.split("Research Problem:")[0]
    return [line[2:-1] for line in head.splitlines() if line.startswith("- ") and line.endswith(":")]


def prompt_of(request: dict) -> str:
    assert len(request["messages"]) == 1 and request["messages"][0]["role"] == "user"
    return request["messages"][0]["content"]


@pytest.fixture
def research(endpoint):
    return next(a for a in agents_builtin_ensure() if a.name == "research")


@pytest.mark.parametrize(
    ("model_id", "tokens", "temperature"),
    [("gpt-4-0613", 500, 0.2), ("claude-3-opus", 2000, 0.5), ("gemini-pro", 2000, 0.5),
     ("huggingface/codellama/CodeLlama-7b-hf", 2000, 0.5), ("openai/gpt-4-0314", 2000, 0.5)],
)  # fmt: skip
def test_an_endpoint_answers_with_what_mlagentbench_sends_its_model_unless_set_otherwise(model_id, tokens, temperature):
    endpoint = ModelEndpoint(name="m", base_url="http://127.0.0.1:9/v1", model_id=model_id)
    assert endpoint.completion_defaults() == {"max_tokens": tokens, "temperature": temperature}
    endpoint.default_max_tokens, endpoint.default_temperature = 1234, 0.0
    assert endpoint.completion_defaults() == {"max_tokens": 1234, "temperature": 0.0}


@pytest.mark.django_db(transaction=True)
def test_the_requests_carry_mlagentbench_tools_sampling_window_and_format_notice(tiny_task, research, llm_server):
    replies = [
        answer("List Files", {"dir_path": "."}, "look around"),
        "I would rather chat.",  # malformed: the same prompt again, with the notice appended
        answer("Execute Script", {"script_name": "train.py"}, "measure the baseline"),
        answer("Inspect Script Lines", LINES, "read"),
        answer("Copy File", {"source": "train.py", "destination": "copy.py"}, "keep a copy"),
        answer("Final Answer", {"final_answer": "nothing better"}, "submit"),
    ]
    llm_server.script = list(replies)
    run = run_execute(run_create(task=tiny_task.task, agent=research, model="test-model", enqueue=False).pk)

    assert run.status == "finished", (run.error, run.stderr_tail)
    steps = list(Step.objects.filter(run=run))
    actions = ["List Files", "Execute Script", "Inspect Script Lines", "Copy File", "Final Answer"]
    assert [s.action for s in steps] == actions
    requests = llm_server.requests
    assert len(requests) == 6
    for request in requests:
        assert request["stop"] == ["Observation:"]
        # What MLAgentBench's complete_text sends a model through the OpenAI API ("scripted-1" names no other).
        assert request["temperature"] == 0.2 and request["max_tokens"] == 500
        assert request["model"] == "scripted-1"
    prompts = [prompt_of(r) for r in requests]

    # Step 1: MLAgentBench's 8 tools, in the environment's order; no step yet.
    assert tools_offered(prompts[0]) == PROMPT_TOOLS
    assert "Action: Write File" not in prompts[0] and "Action: Reflection" not in prompts[0]
    assert prompts[0].endswith(START)
    # The malformed answer: the same prompt with a notice naming all six entries; the answer itself is not shown.
    assert prompts[2].startswith(prompts[1]) and prompts[2] != prompts[1]
    notice = prompts[2][len(prompts[1]) :]
    assert ENTRIES in notice and "I would rather chat" not in prompts[2]
    # Step 4: the three steps so far, each answer then its observation, in order, after the start line.
    blocks = [window_block(replies[i], s.observation) for i, s in zip((0, 2, 3, 4), steps, strict=False)]
    assert prompts[4].endswith(START + blocks[0] + blocks[1] + blocks[2])
    # Step 5: past the window, the first step is gone and (retrieval off) nothing takes its place.
    initial = prompts[0][: -len(START)]
    assert prompts[5] == initial + blocks[1] + blocks[2] + blocks[3]


@pytest.mark.django_db(transaction=True)
def test_after_five_malformed_answers_the_agent_stops_without_acting(tiny_task, research, llm_server):
    llm_server.default = "I would rather chat."
    run = run_execute(run_create(task=tiny_task.task, agent=research, model="test-model", enqueue=False).pk)

    assert run.status == "failed" and run.failure_kind == "agent", run.error
    assert "without a Final Answer" in run.error
    assert "No answer in the format after 5 attempts" in run.stderr_tail
    # The same answer every time (as from a server that ignores temperature): said once per repeat, not repeated.
    assert run.stderr_tail.count("I would rather chat.") == 1
    assert "Step 0: the same answer as attempt 1: the endpoint seems to ignore temperature" in run.stderr_tail
    assert Step.objects.filter(run=run).count() == 0
    prompts = [prompt_of(r) for r in llm_server.requests]
    assert len(prompts) == 5
    notice = prompts[1][len(prompts[0]) :]
    assert ENTRIES in notice
    assert prompts == [prompts[0] + notice * n for n in range(5)]  # one more notice with every attempt


@pytest.mark.django_db(transaction=True)
def test_a_long_observation_is_summarised_block_by_block_on_the_fast_model_then_merged(tiny_task, endpoint, llm_server):
    ModelEndpoint.objects.create(name="test-fast", base_url=llm_server.base_url, model_id="scripted-fast", timeout_s=5)
    agent = Agent.objects.create(name="research-fast", entrypoint="mlab_agents.research")
    replies = [
        answer("List Files", {"dir_path": "."}, "look around"),
        answer("Write File", {"file_name": "long.py", "content": "for c in 'abc':\n    print(c * 32000)\n"}, "write"),
        answer("Execute Script", {"script_name": "long.py"}, "run it"),
        answer("Write File", {"file_name": "mid.py", "content": "print('m' * 6000)\n"}, "write a shorter one"),
        answer("Execute Script", {"script_name": "mid.py"}, "run that"),
        answer("Final Answer", {"final_answer": "done"}, "submit"),
    ]
    agent_prompts, fast_prompts = [], []

    def reply(request):
        if request["model"] == "scripted-fast":
            fast_prompts.append(prompt_of(request))
            if "summaries of its parts" in fast_prompts[-1]:
                return "[Observation]: three lines of a, b and c"
            return f"[Observation]: block {len(fast_prompts)}"
        agent_prompts.append(prompt_of(request))
        return replies[len(agent_prompts) - 1]

    llm_server.default = reply
    run = run_execute(
        run_create(task=tiny_task.task, agent=agent, model="test-model", fast_model="test-fast", enqueue=False).pk
    )

    assert run.status == "finished", (run.error, run.stderr_tail)
    long_step, mid_step = Step.objects.filter(run=run, action="Execute Script")
    long, mid = BlobStore().read_bytes(long_step.observation_blob).decode(), mid_step.observation
    assert len(long) > 96_000 and 5000 < len(mid) <= 10_000  # the agent got the whole output, the blob holds it
    assert len(long_step.observation) < 21_000  # the step's row shows its head and tail
    blocks = [long[i : i + 10_000] for i in range(0, len(long), 10_000)]
    assert len(blocks) == 10
    # Short observations are kept. The long one: one call per 10,000-character block, then one merge (11 calls on
    # 96 kB, as MLAgentBench makes); the one over 5,000 characters but within a block: one call, no merge.
    assert len(fast_prompts) == len(blocks) + 1 + 1
    for block, prompt in zip(blocks, fast_prompts, strict=False):
        assert f"```\n{block}\n```" in prompt
    merge = fast_prompts[10]
    assert all(f"block {n}" in merge for n in range(1, 11)) and "aaaaaaaaaa" not in merge
    assert f"```\n{mid}\n```" in fast_prompts[11]
    fast_requests = [r for r in llm_server.requests if r["model"] == "scripted-fast"]
    assert all(r["temperature"] == 0.01 and r["stop"] == ["Observation:"] for r in fast_requests)
    assert LLMCall.objects.filter(run=run, purpose="summarize observation", model="scripted-fast").count() == 12
    # The summary (after its [Observation]: label) stands in for the observation in the window.
    assert "\nObservation:\n```\n three lines of a, b and c\n```" in agent_prompts[3]
    assert "aaaaaaaaaa" not in agent_prompts[3]
    assert "\nObservation:\n```\n block 12\n```" in agent_prompts[5] and "mmmmmmmmmm" not in agent_prompts[5]


@pytest.mark.django_db(transaction=True)
def test_an_action_input_that_does_not_parse_is_not_acted_on_and_leaves_the_window_after_a_good_step(
    tiny_task, research, llm_server
):
    bad = answer("List Files", '{"dir": .}', "look around")  # neither JSON nor the tool's argument
    llm_server.script = [
        bad,
        answer("List Files", {"dir_path": "."}, "look around again"),
        answer("Final Answer", {"final_answer": "done"}, "submit"),
    ]
    run = run_execute(run_create(task=tiny_task.task, agent=research, model="test-model", enqueue=False).pk)

    assert run.status == "finished", (run.error, run.stderr_tail)
    assert [s.action for s in Step.objects.filter(run=run)] == ["List Files", "Final Answer"]
    prompts = [prompt_of(r) for r in llm_server.requests]
    # The next prompt shows the parsing error as the step's observation, with the tool's usage.
    assert bad.replace("**", "") + "\nObservation:\n```\nActionInputParsingError: " in prompts[1]
    assert '"dir_path": [a valid relative path to a directory' in prompts[1].split("ActionInputParsingError")[1]
    # Once a step went through, the failed one is no longer in the window.
    assert "ActionInputParsingError" not in prompts[2] and "look around again" in prompts[2]
    assert "Thought: look around\n" not in prompts[2]


@pytest.mark.django_db(transaction=True)
def test_with_retrieval_each_step_is_logged_and_past_the_window_the_log_is_retrieved_first(
    tiny_task, endpoint, llm_server
):
    agent = Agent.objects.create(
        name="research-retrieval", entrypoint="mlab_agents.research", config={"retrieval": True}
    )
    replies = [answer("List Files", {"dir_path": "."}, f"look {n}") for n in range(1, 5)]
    replies.append(answer("Final Answer", {"final_answer": "done"}, "submit"))
    agent_prompts = []

    def reply(request):
        prompt = prompt_of(request)
        if "Summarise the action and the observation" in prompt:
            thought = prompt.split("Thought: ")[1].split("\n")[0]
            return f"[Reasoning]: logged {thought}\n[Action]: listed\n[Observation]: files"
        if "Your current research log" in prompt:  # the environment's Retrieval from Research Log action
            return "retrieved: four listings so far"
        agent_prompts.append(prompt)
        return replies[len(agent_prompts) - 1]

    llm_server.default = reply
    run = run_create(
        task=tiny_task.task, agent=agent, model="test-model", enqueue=False, limits=RunLimits(max_steps=20)
    )
    run = run_execute(run.pk)

    assert run.status == "finished", (run.error, run.stderr_tail)
    steps = list(Step.objects.filter(run=run))
    listing, log = "List Files", "Append Summary to Research Log"
    assert [s.action for s in steps] == [listing, log] * 4 + ["Retrieval from Research Log", "Final Answer"]
    assert steps[1].action_input["content"].startswith("\n\nStep 0:\n[Reasoning]: logged look 1")
    assert steps[8].action_input == {"current_plan": ""}
    assert steps[8].observation == "retrieved: four listings so far"
    retrieval = next(prompt_of(r) for r in llm_server.requests if "Your current research log" in prompt_of(r))
    assert all(f"logged look {n}" in retrieval for n in range(1, 5))
    # Reflection joins the tools when retrieval is on; the research-log tools stay out of the prompt.
    assert tools_offered(agent_prompts[0]) == PROMPT_TOOLS + ["Reflection"]
    # Within the window: no retrieval. Past it: the retrieval first, then the last three steps.
    assert "retrieved:" not in agent_prompts[3] and START in agent_prompts[3]
    fifth = agent_prompts[4]
    assert START not in fifth and "Thought: look 1\n" not in fifth
    assert fifth.index("retrieved: four listings so far") < fifth.index("Thought: look 2\n")
    assert fifth.index("Thought: look 2\n") < fifth.index("Thought: look 3\n") < fifth.index("Thought: look 4\n")


WRITE_USAGE = {"usage": {"file_name": "a name", "content": "the text"}}


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ('{"file_name": "a.py", "content": "print("hi")"}', {"file_name": "a.py", "content": 'print("hi")'}),
        ('{"file_name": "a.py", "content": """x = 1\ny = "q"\n"""}',
         {"file_name": "a.py", "content": 'x = 1\ny = "q"\n'}),
        ('```json\n{"file_name": "a.py", "content": "ok"}\n```', {"file_name": "a.py", "content": "ok"}),
        ('{"file_name": "a.py",\n "content": "line 1\nline 2"}', {"file_name": "a.py", "content": "line 1\nline 2"}),
    ],
)  # fmt: skip
def test_an_action_input_json_cannot_read_is_read_as_mlagentbench_reads_it_by_the_arguments_order(raw, parsed):
    """Unescaped quotes inside a value and triple-quoted values pass, as MLAgentBench's fallback lets them."""
    assert parse_action_input(raw, WRITE_USAGE) == parsed


@pytest.mark.parametrize("raw", ['{"file": "a.py"}', '{"content": "x" "file_name": "a.py"}', "no object here"])
def test_an_action_input_without_the_tools_arguments_in_order_is_refused(raw):
    with pytest.raises(Malformed):
        parse_action_input(raw, WRITE_USAGE)
