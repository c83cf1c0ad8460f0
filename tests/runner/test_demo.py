"""The first start's demo: every quick built-in task validated, quickest first, then the tuner on each within a
bounded time, all on the demo's queue; the slow tasks left to be validated before their first run."""

import pytest
from django.core.management import call_command

from runner.demo import DEMO_TUNER_TIME_S, QUICK_TASK_S, demo_queue
from runner.models import Run
from task_bank.models import Task


@pytest.mark.django_db
def test_the_demo_runs_quick_tasks_and_a_real_agent_first_on_its_own_lane(capsys, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    call_command("bench_init")
    out = capsys.readouterr().out
    runs = list(Run.objects.order_by(*Run.QUEUE_ORDER).select_related("task_version", "agent", "task"))
    builtin = Task.objects.filter(source=Task.Source.BUILTIN)

    assert runs and {run.queue for run in runs} == {Run.Queue.DEMO}
    quick = builtin.filter(current_version__max_time_s__lte=QUICK_TASK_S)
    assert {run.task_id for run in runs if run.purpose == Run.Purpose.VALIDATION} == set(
        quick.values_list("pk", flat=True)
    )
    slow = builtin.exclude(pk__in=quick).select_related("current_version")
    assert "smollm-inference" in {task.slug for task in slow}  # 12 minutes of validation: not the demo's
    assert all(task.current_version.status == "pending" for task in slow)
    validation = [run for run in runs if run.purpose == Run.Purpose.VALIDATION]
    tuned = [run for run in runs if run.agent.name == "tuner"]
    assert runs == validation + tuned  # every task's round before any agent's run: none waits behind a search
    limits = [run.task_version.max_time_s for run in validation]
    assert limits == sorted(limits)  # quickest tasks first, whatever order they were loaded in
    assert [run.task_version.max_time_s for run in tuned] == sorted(run.task_version.max_time_s for run in tuned)
    assert tuned and all(run.purpose == Run.Purpose.BENCHMARK for run in tuned)
    assert all(run.task_version.max_time_s <= QUICK_TASK_S and not run.task_version.serve_script for run in tuned)
    assert all(run.limits.max_time_s <= DEMO_TUNER_TIME_S for run in tuned)  # a slow task's search is bounded
    assert f"the tuner on {len(tuned)} of them ({len(runs)} runs on the demo's own worker)" in out
    assert f"{quick.count()} quick built-in tasks validated" in out


@pytest.mark.django_db
def test_a_second_demo_of_the_same_tasks_queues_no_second_round(digits):
    first = demo_queue()
    assert [run.purpose for run in first] == [Run.Purpose.VALIDATION] * 3 + [Run.Purpose.BENCHMARK]
    again = demo_queue()  # the round is under way: only another tuner run
    assert [run.purpose for run in again] == [Run.Purpose.BENCHMARK]
