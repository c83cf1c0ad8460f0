"""The agent process: its own sandbox, without the workspace, the network, the hidden task files or secrets."""

import pytest

from runner.execution import run_execute
from runner.execution.preparation import cache_dir
from runner.services import run_create
from tests.factories import AgentFactory

FINAL = {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}}


@pytest.mark.django_db(transaction=True)
def test_the_agent_sees_no_workspace_no_task_files_no_network_and_no_secrets(tiny_task, settings, monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "platform-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-platform")
    hidden = cache_dir(tiny_task) / "scripts"
    probes = [
        {"probe": "__import__('os').path.exists('/workspace')"},
        {"probe": f"__import__('os').path.exists({str(settings.BENCH_RUNS_DIR)!r})"},
        {"probe": f"__import__('os').path.exists({str(hidden)!r})"},
        {"probe": "sorted(k for k in __import__('os').environ if 'KEY' in k or 'DATABASE' in k or 'SECRET' in k)"},
        {"probe": "__import__('socket').socket().connect_ex(('127.0.0.1', 5432))"},
        FINAL,
    ]
    run = run_execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": probes}), enqueue=False).pk)

    assert hidden.exists()  # prepared on the host, invisible to the agent
    lines = [line for line in run.stderr_tail.splitlines() if line.startswith("probe:")]
    assert lines[:4] == ["probe: False", "probe: False", "probe: False", "probe: []"]
    assert lines[4] != "probe: 0"  # the connection did not succeed
    assert run.status == "finished"


@pytest.mark.django_db(transaction=True)
def test_the_local_sandbox_refuses_an_uploaded_agent(tiny_task, settings, baseline_agent):
    settings.BENCH_SANDBOX = "local"
    from runner.execution import run_execute as execute

    # The baseline (built in) validates the task under the local sandbox...
    run = execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": [FINAL]}), enqueue=False).pk)

    # ...but the uploaded agent is refused, with a message saying what to use instead.
    assert run.status == "failed" and run.failure_kind == "infrastructure"
    assert "runs built-in agents only" in run.error and "BENCH_SANDBOX=bwrap" in run.error
    tiny_task.refresh_from_db()
    assert tiny_task.status == "ready"
