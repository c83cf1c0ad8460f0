"""A task's scripts have the limits its task.toml gives them ([limits] script_time_s, script_memory_mb), else the
platform's; a bare MLAgentBench folder's have no time limit of their own (the run's bounds them), as MLAgentBench
gives its scripts none."""

import pytest

from runner.execution import run_execute
from runner.execution.workspaces import script_limits, script_time_s
from runner.models import Step
from runner.services import run_create
from task_bank.package import TaskPackageError, manifest_parse
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, package_write

pytestmark = pytest.mark.django_db(transaction=True)

LIMITED = """
    title = "Limited"
    [metric]
    name = "value"
    higher_is_better = true
    [limits]
    script_time_s = 2
    script_memory_mb = 512
"""


def test_a_script_is_stopped_at_the_tasks_own_time_limit(tmp_path, tiny_task_ready):
    files = dict(TINY_FILES, **{"task.toml": LIMITED, "env/slow.py": "import time\ntime.sleep(30)\n"})
    version, _ = task_import(root=package_write(tmp_path / "limited", files), slug="limited")
    version.status, version.baseline_score = version.Status.READY, 2.0
    version.save(update_fields=["status", "baseline_score"])
    assert (script_time_s(version), script_limits(version).memory_mb) == (2, 512)

    script = [
        {"type": "act", "action": "Execute Script", "input": {"script_name": "slow.py"}},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]
    run = run_execute(run_create(task=version.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)

    slow = Step.objects.get(run=run, index=0)
    assert slow.is_error and "stopped after the 2-second time limit of one action" in slow.observation


def test_the_platforms_limit_unless_the_task_sets_one_and_none_of_their_own_for_a_bare_mlagentbench_folder(
    tmp_path, settings, tiny_task
):
    settings.BENCH_ACTION_TIMEOUT_S = 1800
    assert script_time_s(tiny_task) == 1800 and script_limits(tiny_task).memory_mb == 2 * 4096
    bare = {rel: text for rel, text in TINY_FILES.items() if rel != "task.toml"}
    version, _ = task_import(root=package_write(tmp_path / "bare", bare), metric_name="value", higher_is_better=True)
    assert (version.script_time_s, script_time_s(version)) == (0, version.max_time_s)


@pytest.mark.parametrize(
    ("limits", "message"),
    [("script_time_s = -1", "limits.script_time_s must be at least 0"),
     ("script_memory_mb = 10", "limits.script_memory_mb must be at least 256")],
)  # fmt: skip
def test_a_script_limit_out_of_range_is_refused(limits, message):
    with pytest.raises(TaskPackageError, match=message):
        manifest_parse(f"[limits]\n{limits}\n", default_title="x")
