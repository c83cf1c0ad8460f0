"""MLAgentBench's own agents run unchanged: a package of its code with an [mlagentbench] table in agent.toml runs its
agent class through the adapter (mlab_agents.mlagentbench), with MLAgentBench's environment interface over the
protocol and its model calls through the gateway. Tried here with a stand-in of MLAgentBench's interface
(tests/agents/mlagentbench_standin): its own LLM.py raises if imported, its actions describe themselves."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.urls import reverse

from runner.agents.packages import AgentPackageError, agent_import, agent_manifest_parse
from runner.agents.smoke import agent_smoke_run
from runner.execution import run_execute
from runner.models import Agent, ModelEndpoint, Step
from runner.services import run_create

STANDIN = Path(__file__).resolve().parents[2] / "agents" / "mlagentbench_standin"


def reply(action: str, action_input: dict, thought: str) -> str:
    return f"Thought: {thought}\nAction: {action}\nAction Input: {json.dumps(action_input)}"


def standin_prompt(research_problem: str) -> str:
    """The first prompt the stand-in's own code builds, built here by its code with MLAgentBench's runner args."""
    sys.path.insert(0, str(STANDIN))
    sys.modules["anthropic"] = SimpleNamespace(AI_PROMPT="\n\nAssistant:", HUMAN_PROMPT="\n\nHuman:")
    sys.modules["MLAgentBench.LLM"] = SimpleNamespace(complete_text=None, complete_text_fast=None)
    try:
        import MLAgentBench.high_level_actions as high
        import MLAgentBench.low_level_actions as low
        from MLAgentBench.agents.agent import initial_prompt

        infos = {i.name: i for i in [*low.LOW_LEVEL_ACTIONS, *high.HIGH_LEVEL_ACTIONS] if i.name != "Request Help"}
        return initial_prompt(
            SimpleNamespace(action_infos=infos, research_problem=research_problem), SimpleNamespace(max_retries=2)
        )
    finally:
        sys.path.remove(str(STANDIN))
        for name in [n for n in sys.modules if n == "anthropic" or n.startswith("MLAgentBench")]:
            del sys.modules[name]


@pytest.mark.django_db(transaction=True)
def test_an_mlagentbench_agent_class_runs_unchanged_with_its_own_actions_and_the_platforms_models(
    tiny_task, endpoint, llm_server, settings, client
):
    settings.BENCH_SANDBOX = "bwrap"
    ModelEndpoint.objects.create(name="test-fast", base_url=llm_server.base_url, model_id="scripted-fast", timeout_s=5)
    agent, created = agent_import(source=STANDIN, smoke_test=True)
    assert created and agent.entrypoint == "mlab_agents.mlagentbench" and agent.uses_llm
    assert agent.config == {"mlagentbench": {"agent": "StandInAgent", "args": {"max_retries": 2}}}
    assert agent_smoke_run(agent.pk) == "passed", Agent.objects.get(pk=agent.pk).smoke_error

    edit = {"script_name": "train.py", "edit_instruction": "write 3", "save_name": "train.py"}
    replies = [
        reply("List Files", {"dir_path": "."}, "see what is there"),  # backup/ there from the start, as there
        understand := reply("Understand File", {"file_name": "train.py", "things_to_look_for": "what"}, "read it"),
        reply("Reflection", {"things_to_reflect_on": "the plan"}, "think"),
        reply("Edit Script (AI)", edit, "raise it"),
        reply("List Files", {"dir_path": "."}, "see what is there"),
        reply("Execute Script", {"script_name": "train.py"}, "measure it"),
        reply("Final Answer", {"final_answer": "three"}, "submit"),
    ]
    new_train = "\nprint('x' * 1_200_000)\nopen('value.txt', 'w').write('3')"  # 1.2 MB of output

    def answer(request):
        if request["model"] == "scripted-fast":
            return f"```{new_train}```" if "Stand-in edit" in request["messages"][0]["content"] else "a summary"
        return replies.pop(0)

    llm_server.default = answer
    run = run_execute(
        run_create(task=tiny_task.task, agent=agent, model="test-model", fast_model="test-fast", enqueue=False).pk
    )

    assert (run.status, run.final_score) == ("finished", 3.0), (run.error, run.stderr_tail)
    steps = list(Step.objects.filter(run=run))
    names = ["List Files", "Understand File", "Reflection", "Edit Script (AI)", "List Files", "Execute Script"]
    names.append("Final Answer")
    assert [s.action for s in steps] == names
    assert "backup/" in steps[0].observation.split("\n")  # as MLAgentBench's environment makes it at the start
    assert steps[5].entries == {"Thought": "measure it"}  # the answer's entries, for the trace
    main = [r for r in llm_server.requests if r["model"] == "scripted-1"]
    fast = [r for r in llm_server.requests if r["model"] == "scripted-fast"]
    # The high-level actions are the package's own: its prompts, its words, its files through the platform.
    assert fast[0]["messages"][0]["content"].startswith("Stand-in reading train.py (")
    assert steps[1].observation == "a summary" and steps[1].detail["made_by"] == "agent"
    assert [low["action"] for low in steps[1].low_level] == ["Read File"]
    # Reflection reads a research log the agent never wrote: the package's error, and no model call for it.
    assert steps[2].observation.startswith("Stand-in EnvError: cannot read file research_log.log")
    assert not any("the plan" in r["messages"][0]["content"] for r in fast)
    assert steps[3].observation == "Stand-in saved train.py"
    assert [low["action"] for low in steps[3].low_level] == ["Read File", "Copy File", "Write File"]
    assert steps[3].low_level[2]["input"]["content"] == new_train  # written as the model wrote it
    assert "backup/" in steps[4].observation.split("\n")
    page = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    assert page.count("agent's code</span>") == 3  # the trace says whose code made each observation
    # Its first prompt is the one its own code builds, from its own action descriptions.
    assert main[0]["messages"] == [{"role": "user", "content": standin_prompt(tiny_task.research_problem)}]
    assert "Runs a Python script." in main[0]["messages"][0]["content"]
    # The settings MLAgentBench's complete_text sends: its stop, the endpoint's tokens and temperature (its OpenAI
    # path for "scripted-1": 500 at 0.2), and complete_text_fast's 0.01 on the run's fast model.
    assert all(r["stop"] == ["Observation:"] and (r["max_tokens"], r["temperature"]) == (500, 0.2) for r in main)
    quick = [r for r in fast if "Stand-in edit" not in r["messages"][0]["content"]]  # the edit: complete_text's own
    assert quick and all(r["temperature"] == 0.01 for r in quick)
    assert "\n\nAssistant:\n" + understand in (main[2]["messages"][0]["content"])
    # 1.2 MB of output reaches the agent whole, which summarises it as MLAgentBench's does: 10,000-character
    # blocks and a merge, 122 calls in one step within the platform's limits.
    blocks = [r for r in fast if r["messages"][0]["content"].startswith("Summarise block")]
    assert len(blocks) == 121 and sum(r["messages"][0]["content"].startswith("Merge: ") for r in fast) == 1
    assert "Final message:  Finished: 7 steps" in run.stderr_tail


@pytest.fixture
def standin_copy(tmp_path) -> Path:
    copy = tmp_path / "standin"
    shutil.copytree(STANDIN, copy)
    return copy


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda root: (root / "MLAgentBench" / "schema.py").unlink(), "MLAgentBench/schema.py is missing"),
        (lambda root: (root / "MLAgentBench" / "environment.py").unlink(), "MLAgentBench/environment.py is missing"),
        (
            lambda root: (root / "agent.toml").write_text('name = "x"\n[mlagentbench]\nagent = "NoSuchAgent"\n'),
            "[mlagentbench] agent 'NoSuchAgent': no module of MLAgentBench/agents/ defines it",
        ),
    ],
)
def test_a_package_without_mlagentbenchs_folder_or_the_class_is_refused_naming_what_is_missing(
    standin_copy, change, message
):
    change(standin_copy)
    with pytest.raises(AgentPackageError) as refused:
        agent_import(source=standin_copy)
    assert message in str(refused.value)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("[mlagentbench]\n", "[mlagentbench] needs agent"),
        ('[mlagentbench]\nagent = "A"\n[mlagentbench.args]\nllm_name = "gpt-4"\n', "llm_name is not one of runner.py"),
        (
            '[mlagentbench]\nagent = "A"\n[mlagentbench.args]\nmax_retries = "5"\n',
            "max_retries is a string; expected int",
        ),
        ('entrypoint = "mine"\n[mlagentbench]\nagent = "A"\n', "runs through mlab_agents.mlagentbench"),
    ],
)
def test_an_mlagentbench_table_that_cannot_be_run_is_refused(table, message):
    with pytest.raises(AgentPackageError) as refused:
        agent_manifest_parse(f'name = "x"\n{table}')
    assert message in str(refused.value)
