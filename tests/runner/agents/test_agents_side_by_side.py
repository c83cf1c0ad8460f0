"""The field's comparison on one task: AIDE, MLAgentBench's own research agent (a stand-in of its interface, run
through the [mlagentbench] adapter) and our research agent, each run with scripted answers, ranked side by side on
the leaderboard, paired on the compare page and plotted on the cost chart."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from django.urls import reverse

from runner.agents.builtin import agents_builtin_ensure
from runner.agents.packages import agent_import
from runner.execution import run_execute
from runner.models import RunLimits
from runner.services import run_create
from tests.runner.agents.test_aide_agent import PACKAGE as AIDE_PACKAGE
from tests.runner.agents.test_aide_agent import scripted_model
from tests.runner.agents.test_builtin_agents import answer
from tests.runner.agents.test_mlagentbench_agents import STANDIN, reply


@pytest.mark.django_db(transaction=True)
def test_aide_mlagentbenchs_research_agent_and_ours_rank_side_by_side(tiny_task_ready, endpoint, llm_server, client):
    task = tiny_task_ready.task
    ours = next(agent for agent in agents_builtin_ensure() if agent.name == "research")
    llm_server.script = [
        answer("Write File", {"file_name": "value.txt", "content": "9"}, "write a bigger value"),
        answer("Final Answer", {"final_answer": "value.txt holds 9"}, "submit"),
    ]
    research = run_execute(run_create(task=task, agent=ours, model="test-model", enqueue=False).pk)
    theirs, _ = agent_import(source=STANDIN, smoke_test=False)
    llm_server.script = [
        reply("Execute Script", {"script_name": "train.py"}, "measure it"),
        reply("Final Answer", {"final_answer": "as it was"}, "submit"),
    ]
    standin = run_execute(run_create(task=task, agent=theirs, model="test-model", enqueue=False).pk)
    aide, _ = agent_import(source=AIDE_PACKAGE, smoke_test=False)
    llm_server.script, llm_server.default = [], scripted_model
    scripted_model.drafts, scripted_model.order = 0, ["1 / 0", "3"]
    limits = RunLimits(max_steps=14)
    searched = run_execute(run_create(task=task, agent=aide, model="test-model", limits=limits, enqueue=False).pk)
    outcomes = [(r.status, r.final_score) for r in (research, standin, searched)]
    assert outcomes == [("finished", 9.0), ("finished", 2.0), ("finished", 5.0)], outcomes

    keys = [f"{agent.name}@{agent.version}/test-model" for agent in (ours, theirs, aide)]
    board = client.get(reverse("leaderboard:leaderboard")).content.decode()
    assert all(f"?a={quote(key, safe='/')}" in board for key in keys), keys  # a row each, with its Compare link
    paired = client.get(reverse("leaderboard:compare") + f"?a={keys[2]}&b={keys[0]}")
    assert paired.status_code == 200 and "tiny" in paired.content.decode()
    chart = board[board.index('id="figure-cost-vs-success"') :]
    figure = json.loads(chart[chart.index(">") + 1 : chart.index("</script>")])
    plotted = {name for trace in figure["data"] for name in [trace.get("name", "")] + list(trace.get("text") or [])}
    assert all(any(agent.name in str(name) for name in plotted) for agent in (ours, theirs, aide)), plotted
