"""AIDE runs unchanged: a package with an [aide] table runs AIDE's own agent loop (aideml) through the adapter
(mlab_agents.aide). A scripted model server answers AIDE's prompts: plans with a code block for its drafts and
improvements, its review as a function call. AIDE's search, prompts and parsing are its own; its code runs as
Write File and Execute Script in the workspace's sandbox, and its best node is what the task's eval scores."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from django.urls import reverse

from runner.agents.packages import AgentPackageError, agent_import, agent_manifest_parse
from runner.agents.smoke import agent_smoke_run
from runner.execution import run_execute
from runner.models import Agent, LLMCall, RunLimits, Step
from runner.services import run_create

PACKAGE = Path(__file__).resolve().parents[2] / "agents" / "aide"


def plan_and_code(value: str) -> str:
    code = f'value = {value}\nwith open("value.txt", "w") as fh:\n    fh.write(str(value))\nprint(f"VALUE={{value}}")'
    return f"Write the value to value.txt and print it.\n\n```python\n{code}\n```"


def scripted_model(request: dict):
    """AIDE's prompts answered: its drafts' values in ``scripted_model.order`` (by default a first that crashes, a
    second that writes 3), an improvement adding 2; each review as AIDE's submit_review function call, its metric
    the VALUE the output printed."""
    prompt = request["messages"][0]["content"]
    if "tools" in request:
        return review_call(prompt)
    if "# Previous solution" in prompt:
        return plan_and_code(str(int(re.search(r"value = (\d+)", prompt).group(1)) + 2))
    scripted_model.drafts += 1
    return plan_and_code(scripted_model.order[min(scripted_model.drafts, len(scripted_model.order)) - 1])


scripted_model.drafts, scripted_model.order = 0, ["1 / 0", "3"]


def review_call(prompt: str) -> dict:
    """AIDE's review as its submit_review function call: a bug when the output printed no VALUE, else that metric."""
    printed = re.findall(r"VALUE=([\d.]+)", prompt)
    review = {
        "is_bug": not printed,
        "summary": "it crashed" if not printed else f"it wrote {printed[-1]}",
        "metric": float(printed[-1]) if printed else None,
        "lower_is_better": False,
    }
    function = {"name": "submit_review", "arguments": json.dumps(review)}
    return {"content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": function}]}


def digits_code(trees: int, depth: int | None) -> str:
    """A solution of the built-in digits task as AIDE's prompts ask for it (its data in ./input, its submission in
    ./working): a random forest, its validation accuracy printed as VALUE."""
    return f"""Fit a random forest and write submission.csv.

```python
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

train, test = pd.read_csv("./input/train.csv"), pd.read_csv("./input/test.csv")
features = [c for c in train.columns if c.startswith("p")]
X_train, X_valid, y_train, y_valid = train_test_split(train[features], train["label"], test_size=0.2, random_state=0)
model = RandomForestClassifier(n_estimators={trees}, max_depth={depth}, random_state=0).fit(X_train, y_train)
print(f"VALUE={{model.score(X_valid, y_valid):.4f}}")
model.fit(train[features], train["label"])
predictions = pd.DataFrame({{"id": test["id"], "label": model.predict(test[features])}})
predictions.to_csv("./working/submission.csv", index=False)
```"""


def digits_model(request: dict):
    """AIDE's prompts on digits: drafts like the starter script (5 shallow trees), an improvement with 100 deep ones."""
    prompt = request["messages"][0]["content"]
    if "tools" in request:
        return review_call(prompt)
    return digits_code(100, None) if "# Previous solution" in prompt else digits_code(5, 4)


@pytest.mark.django_db(transaction=True)
def test_aides_own_loop_searches_and_its_best_node_is_scored(
    backend, tiny_task, endpoint, llm_server, settings, tmp_path, client
):
    settings.BENCH_SANDBOX = backend
    scripted_model.drafts, scripted_model.order = 0, ["1 / 0", "3"]
    agent, created = agent_import(source=PACKAGE, smoke_test=True)
    assert created and agent.entrypoint == "mlab_agents.aide" and agent.uses_llm
    assert agent_smoke_run(agent.pk) == "passed", Agent.objects.get(pk=agent.pk).smoke_error
    llm_server.default = scripted_model

    limits = RunLimits(max_steps=14)  # room for AIDE's three nodes and the end
    run = run_execute(run_create(task=tiny_task.task, agent=agent, model="test-model", limits=limits, enqueue=False).pk)

    assert (run.status, run.final_score) == ("finished", 5.0), (run.error, run.stderr_tail)
    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert [s.action for s in steps] == ["Write File", "Execute Script"] * 5 + ["Final Answer"]
    assert steps[0].action_input["file_name"] == "aide_workspace.py"
    assert steps[8].action_input["file_name"] == "aide_collect.py"
    # Each node: its stage, its parent and its plan; AIDE's review of it is the next step's entry.
    nodes = steps[2:8:2]
    assert [s.entries["Stage"] for s in nodes] == ["draft", "draft", "improve"]
    assert nodes[2].entries["Parent"] == nodes[1].entries["Node"].split()[0]
    assert nodes[0].entries["Plan"] == "Write the value to value.txt and print it."
    assert "ZeroDivisionError" in steps[3].observation
    assert steps[4].entries["Review"].startswith("node ") and ": bug." in steps[4].entries["Review"]
    assert "metric 3.0" in steps[6].entries["Review"] and "metric 5.0" in steps[8].entries["Review"]
    assert steps[9].observation.endswith("copied from working/ to the workspace: nothing\n")  # value.txt is at the root
    assert "AIDE's best node" in steps[-1].action_input["final_answer"]
    # The run page draws the tree: the improvement under the draft it improved, each with AIDE's review.
    page = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    tree = page[page.index('<details class="search-tree"') : page.index("</details>", page.index("search-tree"))]
    second, improved = nodes[1].entries["Node"].split()[0], nodes[2].entries["Node"].split()[0]
    under = rf"draft {second}</a>\s*<span[^>]*>metric 3.0. it wrote 3</span>\s*<ul>\s*<li>"
    assert re.search(under + rf'<a href="#step-6">improve {improved}<', tree), tree

    code = [r for r in llm_server.requests if "tools" not in r]
    reviews = [r for r in llm_server.requests if "tools" in r]
    # AIDE's own prompts, its data preview made in the sandbox by its own code, of its own folders.
    first = code[0]["messages"][0]["content"]
    assert first.startswith("# Introduction\n\nYou are a Kaggle grandmaster")
    overview = first[first.index("# Data Overview") :]
    assert "input/\n    data.txt (1 lines)\n    train.py (" in overview and "working/" in overview
    assert [r["tools"][0]["function"]["name"] for r in reviews] == ["submit_review"] * 3
    assert all(r["tool_choice"] == {"type": "function", "function": {"name": "submit_review"}} for r in reviews)
    calls = LLMCall.objects.filter(run=run).order_by("pk")
    assert [c.purpose for c in calls] == ["code", "review"] * 3
    assert calls[1].tool_calls[0]["function"]["name"] == "submit_review"

    # AIDE by itself, its own `aide` command on the task's files with the same answers, searches the same way.
    alone = aide_alone(tiny_task, llm_server, tmp_path)
    platform = [s.action_input["content"] for s in nodes]
    assert [node["code"] for node in alone["nodes"]] == platform
    assert [node["metric"]["value"] for node in alone["nodes"]] == [None, 3.0, 5.0]
    assert alone["value"] == "5" and alone["calls"] == len(calls)


@pytest.mark.django_db(transaction=True)
def test_aide_improves_a_builtin_task_and_its_best_node_is_what_the_eval_scores(digits, endpoint, llm_server, settings):
    settings.BENCH_SANDBOX = "bwrap"
    llm_server.default = digits_model
    agent, _ = agent_import(source=PACKAGE, smoke_test=False)

    run = run_execute(run_create(task=digits.task, agent=agent, model="test-model", enqueue=False).pk)

    digits.refresh_from_db()  # validated first, as any run of an unvalidated version does
    assert run.status == "finished" and run.succeeded, (run.error, run.stderr_tail, run.final_score)
    assert run.final_score > digits.baseline_score * 1.1
    executed = Step.objects.filter(run=run, action="Execute Script").order_by("index")
    printed = [float(v) for s in executed for v in re.findall(r"VALUE=([\d.]+)", s.observation)]
    assert len(printed) == 3 and printed[2] == max(printed) > printed[0]  # the improvement validated best
    # Its submission was written to working/, as AIDE's prompts ask; the eval scored it at the root.
    assert "copied from working/ to the workspace: submission.csv" in executed.last().observation


@pytest.mark.django_db(transaction=True)
def test_a_search_the_runs_steps_cut_short_ends_on_its_best_node(tiny_task, endpoint, llm_server, settings):
    settings.BENCH_SANDBOX = "bwrap"
    scripted_model.drafts, scripted_model.order = 0, ["3", "1 / 0"]  # the best node is not the last
    llm_server.default = scripted_model
    agent, _ = agent_import(source=PACKAGE, smoke_test=False)

    limits = RunLimits(max_steps=11)  # the preview and two nodes leave 5 steps: no room for a third and the end
    run = run_execute(run_create(task=tiny_task.task, agent=agent, model="test-model", limits=limits, enqueue=False).pk)

    assert (run.status, run.final_score) == ("finished", 3.0), (run.error, run.stderr_tail)
    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert [s.action for s in steps] == ["Write File", "Execute Script"] * 5 + ["Final Answer"]
    assert steps[6].action_input["content"] == steps[2].action_input["content"]  # the best node, run again
    assert "metric 3.0" in steps[-1].action_input["final_answer"] and "of 2" in steps[-1].action_input["final_answer"]


def aide_alone(version, llm_server, tmp_path) -> dict:
    """AIDE's own ``aide`` command on the task's starting files, its OpenAI backend pointed at the scripted server:
    its nodes (journal.json), the value its workspace ends with, the calls it made."""
    data = tmp_path / "data"
    shutil.copytree(Path(version.package_path) / "env", data)
    before = len(llm_server.requests)
    scripted_model.drafts = 0
    metric = "The task's evaluation scores the final workspace by value (higher is better)."
    settings = [
        f"data_dir={data}", f"goal={version.research_problem}", f"eval={metric}", "agent.code.model=test-model",
        "agent.feedback.model=test-model", "generate_report=False", f"log_dir={tmp_path / 'logs'}",
        f"workspace_dir={tmp_path / 'workspaces'}", "exp_name=alone",
    ]  # fmt: skip
    table = tomllib.loads((PACKAGE / "agent.toml").read_text())["aide"]["config"]
    settings += [f"{key}={value}" for key, value in table.items()]
    env = dict(os.environ, OPENAI_BASE_URL=llm_server.base_url, OPENAI_API_KEY="unused")
    done = subprocess.run(
        [str(Path(sys.executable).parent / "aide"), *settings], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [journal] = (tmp_path / "logs").glob("*/journal.json")
    [workspace] = (tmp_path / "workspaces").iterdir()
    return {
        "nodes": json.loads(journal.read_text())["nodes"],
        "value": (workspace / "value.txt").read_text(),
        "calls": len(llm_server.requests) - before,
    }


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('"agent.code.model" = "gpt-4o"', "chooses a model"),
        ('"log_dir" = "/tmp"', "is not a key of AIDE's agent settings"),
        ('"agent.steps" = [1]', "expected a value"),
    ],
)
def test_an_aide_table_that_cannot_be_run_is_refused(table, message):
    with pytest.raises(AgentPackageError, match=re.escape(message)):
        agent_manifest_parse(f'name = "a"\n[aide.config]\n{table}\n')


@pytest.mark.parametrize(
    ("observation", "exc_type", "last"),
    [
        ("The script has been executed. Here is the output:\nVALUE=3\n", None, "Execution time: "),
        (
            "The script has been executed. Here is the output:\nTraceback (most recent call last):\n"
            '  File "runfile.py", line 1, in <module>\n    value = 1 / 0\nZeroDivisionError: division by zero\n'
            "\n(The script exited with code 1.)",
            "ZeroDivisionError",
            "Execution time: ",
        ),
        (
            "EnvError: the script runfile.py did not finish: it was stopped after the 60-second time limit of one "
            "action. Output before it was stopped:\nepoch 1",
            "TimeoutError",
            "TimeoutError: Execution exceeded the time limit of a minute",
        ),
        ("EnvError: the script runfile.py did not finish: it was killed (SIGKILL)\n", "RuntimeError", "Execution"),
        (
            "The script has been executed. Here is the output:\nno data\n\n(The script exited with code 2.)",
            "SystemExit",
            "Execution time: ",
        ),
    ],
)
def test_an_execute_script_observation_is_what_aides_interpreter_returns(observation, exc_type, last):
    from mlab_agents.aide import execution_result

    result = execution_result(observation, 2.5, 60.0)
    assert result.exc_type == exc_type and result.term_out[-1].startswith(last)
    assert not result.term_out[0].startswith("The script has been executed")  # the output as AIDE's own shows it
    assert result.exec_time == 2.5
