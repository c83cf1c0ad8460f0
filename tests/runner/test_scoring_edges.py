"""Success at its edges: the metric's direction, exactly at the threshold and either side of it, a task's own
threshold, a baseline of 0 or none; and a whole run on a task whose metric is better lower.

The numbers are chosen to be exact in binary (4.0, 0.25, ...), so "exactly at the threshold" is exactly there."""

import pytest

from runner.execution import run_execute
from runner.services import run_create
from task_bank.models import TaskVersion
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, package_write


def version(*, higher_is_better: bool = True, threshold: float = 0.25, baseline: float | None = 4.0) -> TaskVersion:
    return TaskVersion(higher_is_better=higher_is_better, success_threshold=threshold, baseline_score=baseline)


@pytest.mark.parametrize(
    ("higher_is_better", "score", "improvement"),
    [
        (True, 5.0, 0.25),
        (True, 3.0, -0.25),
        (True, 4.0, 0.0),
        (False, 3.0, 0.25),
        (False, 5.0, -0.25),
        (False, 0.0, 1.0),
    ],
)
def test_improvement_is_relative_and_in_the_metrics_direction(higher_is_better, score, improvement):
    assert version(higher_is_better=higher_is_better).improvement_of(score) == improvement


@pytest.mark.parametrize(
    ("higher_is_better", "score", "succeeded"),
    [
        (True, 5.0, False),  # exactly 25% better: the threshold is to be beaten, not met
        (True, 5.0 + 1e-9, True),  # just above
        (True, 5.0 - 1e-9, False),  # just below
        (True, 3.0, False),  # worse
        (True, 100.0, True),
        (False, 3.0, False),  # exactly 25% lower
        (False, 3.0 - 1e-9, True),
        (False, 3.0 + 1e-9, False),
        (False, 5.0, False),  # higher is worse here, however much higher
        (False, 100.0, False),
        (False, 0.0, True),
    ],
)
def test_success_needs_more_than_the_threshold_in_the_metrics_direction(higher_is_better, score, succeeded):
    assert version(higher_is_better=higher_is_better).succeeded_with(score) is succeeded


@pytest.mark.parametrize("higher_is_better", [True, False])
def test_any_gain_at_or_below_the_tasks_own_threshold_is_no_success(higher_is_better):
    small_gain = 4.5 if higher_is_better else 3.5  # 12.5% better: above the default 10%, below this task's 25%
    assert version(higher_is_better=higher_is_better).succeeded_with(small_gain) is False
    assert version(higher_is_better=higher_is_better, threshold=0.10).succeeded_with(small_gain) is True
    assert version(higher_is_better=higher_is_better, threshold=0.125).succeeded_with(small_gain) is False
    assert version(higher_is_better=higher_is_better, threshold=0.5).succeeded_with(small_gain) is False


def test_a_negative_baseline_is_improved_on_by_its_absolute_value():
    assert version(baseline=-4.0).improvement_of(-3.0) == 0.25
    assert version(baseline=-4.0).succeeded_with(-3.0) is False
    assert version(baseline=-4.0).succeeded_with(-2.0) is True
    assert version(higher_is_better=False, baseline=-4.0).improvement_of(-5.0) == 0.25
    assert version(higher_is_better=False, baseline=-4.0).succeeded_with(-6.0) is True


def test_a_baseline_measured_with_the_score_replaces_the_versions():
    task = version(baseline=4.0)
    assert task.improvement_of(5.0, baseline=2.0) == 1.5
    assert task.succeeded_with(5.0, baseline=2.0) is True
    assert task.succeeded_with(5.0, baseline=5.0) is False
    lower = version(higher_is_better=False, baseline=None)  # a timed task: no baseline of its own
    assert lower.improvement_of(1.0, baseline=2.0) == 0.5
    assert lower.succeeded_with(1.0, baseline=2.0) is True


def test_without_a_baseline_success_is_unknown():
    task = version(baseline=None)
    assert task.improvement_of(5.0) is None
    assert task.succeeded_with(5.0) is None
    assert task.succeeded_with(None) is None


def test_a_baseline_of_zero_has_no_relative_improvement_and_no_success():
    # 0 -> 1 is no percentage: improvement is unknown, and unknown is never a success.
    for higher_is_better in (True, False):
        task = version(higher_is_better=higher_is_better, baseline=0.0)
        assert task.improvement_of(1.0) is None
        assert task.improvement_of(-1.0) is None
        assert task.succeeded_with(1.0) is not True
        assert task.succeeded_with(-1.0) is not True


def test_a_run_without_a_score_did_not_succeed():
    assert version().improvement_of(None) is None
    assert version().succeeded_with(None) is False


LOWER_FILES = {
    **TINY_FILES,
    "task.toml": """
        title = "Lower"
        category = "canonical"
        [metric]
        name = "loss"
        higher_is_better = false
        success_threshold = 0.25
        [limits]
        max_steps = 10
        max_time_s = 120
    """,
    "env/train.py": """
        with open("value.txt", "w") as fh:
            fh.write("4.0")
    """,
}


@pytest.mark.django_db(transaction=True)
def test_a_run_on_a_lower_is_better_task_succeeds_only_by_beating_the_threshold_downwards(tmp_path):
    task_version, _ = task_import(root=package_write(tmp_path / "lower", LOWER_FILES), slug="lower")

    def run_writing(value: str | None):
        script = [{"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}}]
        if value is not None:
            script.insert(
                0, {"type": "act", "action": "Write File", "input": {"file_name": "value.txt", "content": value}}
            )
        agent = AgentFactory(config={"script": script})
        return run_execute(run_create(task=task_version.task, agent=agent, enqueue=False).pk)

    better = run_writing("2.0")  # half the loss
    task_version.refresh_from_db()
    assert task_version.baseline_score == 4.0
    assert (better.status, better.final_score, better.improvement, better.succeeded) == ("finished", 2.0, 0.5, True)

    at_threshold = run_writing("3.0")  # 25% lower: the threshold met, not beaten
    assert (at_threshold.final_score, at_threshold.improvement, at_threshold.succeeded) == (3.0, 0.25, False)

    higher = run_writing("8.0")  # a higher number is a worse loss
    assert (higher.final_score, higher.improvement, higher.succeeded) == (8.0, -1.0, False)

    nothing = run_writing(None)  # no value.txt: eval.py cannot score the workspace
    assert (nothing.status, nothing.final_score, nothing.improvement, nothing.succeeded) == (
        "finished",
        None,
        None,
        False,
    )
    assert "value.txt" in nothing.eval_error and "No such file" in nothing.eval_error
