"""Cancel, fork, the reaper and the trace export."""

import json
import threading
import time
from datetime import timedelta

import pytest
import redis
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from bench.celery import app as celery_app
from runner.execution import run_execute
from runner.execution.reaper import runs_reap
from runner.execution.validation import task_version_validate_queue
from runner.jobs import QueueUnreachable
from runner.models import Run, RunLimits, RunSpec, Step
from runner.services import batch_create, run_cancel, run_create, run_fork
from tests.brokers import use_broker
from tests.factories import AgentFactory, RunFactory, validate_now
from tests.integration.conftest import REDIS_URL

FINAL = {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}}


def act(action: str, **args) -> dict:
    return {"type": "act", "action": action, "input": args, "entries": {"Thought": f"do {action}"}}


def execute_in_thread(run_id: int) -> threading.Thread:
    def target():
        try:
            run_execute(run_id)
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_a_running_script(tiny_task, baseline_agent):
    # Validate first, so the run below goes straight to its agent.
    validate_now(tiny_task)
    agent = AgentFactory(
        config={
            "script": [
                act("Write File", file_name="sleep.py", content="import time\ntime.sleep(3600)\n"),
                act("Execute Script", script_name="sleep.py"),
                FINAL,
            ]
        }
    )
    run = run_create(task=tiny_task.task, agent=agent, enqueue=False)
    thread = execute_in_thread(run.pk)
    deadline = time.monotonic() + 30
    while Run.objects.get(pk=run.pk).live_action != "Execute Script":
        assert time.monotonic() < deadline, "the script never started"
        time.sleep(0.1)
    time.sleep(1)

    assert run_cancel(run=run)
    thread.join(timeout=120)  # the script would sleep an hour: the run ending at all means it was stopped

    run.refresh_from_db()
    assert not thread.is_alive()
    assert run.status == "cancelled"
    steps = list(Step.objects.filter(run=run))
    assert [s.action for s in steps] == ["Write File", "Execute Script"]
    assert "it was cancelled" in steps[1].observation
    assert run.final_score is None  # a cancelled run is not evaluated


@pytest.mark.django_db
def test_cancelling_a_queued_validation_lets_the_version_be_validated_again(tiny_task):
    validation = task_version_validate_queue(version=tiny_task, enqueue=False)
    assert run_cancel(run=validation[0])
    tiny_task.refresh_from_db()
    assert tiny_task.status == "pending"
    assert {r.status for r in Run.objects.filter(pk__in=[r.pk for r in validation])} == {"cancelled"}
    assert task_version_validate_queue(version=tiny_task, enqueue=False) != []


@pytest.mark.django_db
def test_a_queued_run_is_cancelled_at_once(tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.QUEUED)
    assert run_cancel(run=run)
    run.refresh_from_db()
    assert run.status == "cancelled" and run.finished_at is not None
    assert run_execute(run.pk) is None  # a worker that gets the message later leaves it alone


@pytest.mark.django_db(transaction=True)
def test_a_fork_starts_from_the_step_n_workspace_with_steps_0_to_n(tiny_task):
    script = [
        act("Write File", file_name="a.txt", content="first"),
        act("Write File", file_name="b.txt", content="second"),
        act("Write File", file_name="value.txt", content="7"),
        FINAL,
    ]
    agent = AgentFactory(config={"script": script})
    original = run_execute(run_create(task=tiny_task.task, agent=agent, enqueue=False).pk)
    assert original.final_score == 7.0 and original.final_answer == "done"

    fork_agent = AgentFactory(config={"script": script[:2] + [act("List Files", dir_path="."), FINAL]})
    fork = run_fork(run=original, step_index=1, agent=fork_agent)
    fork = run_execute(fork.pk)

    steps = list(Step.objects.filter(run=fork))
    assert [(s.index, s.action, s.inherited) for s in steps] == [
        (0, "Write File", True),
        (1, "Write File", True),
        (2, "List Files", False),
        (3, "Final Answer", False),
    ]
    listing = steps[2].observation.split()
    assert "a.txt" in listing and "b.txt" in listing and "value.txt" not in listing
    assert "started with 2 earlier steps" in fork.stderr_tail
    assert fork.forked_from_id == original.pk and fork.fork_step == 1


@pytest.mark.django_db
def test_the_reaper_requeues_a_run_whose_worker_died_and_gives_up_after_max_attempts(tiny_task, settings):
    settings.BENCH_RUN_MAX_ATTEMPTS = 2
    old = timezone.now() - timedelta(minutes=10)
    dead = RunFactory(task_version=tiny_task, status=Run.Status.RUNNING, attempt=1, heartbeat_at=old)
    dead_twice = RunFactory(
        task_version=tiny_task, status=Run.Status.RUNNING, attempt=2, lost_attempts=1, heartbeat_at=old
    )
    alive = RunFactory(task_version=tiny_task, status=Run.Status.RUNNING, attempt=1, heartbeat_at=timezone.now())
    # Handed back by four deploys, then its worker died: one lost attempt, not five.
    deployed = RunFactory(task_version=tiny_task, status=Run.Status.RUNNING, attempt=5, heartbeat_at=old)

    result = runs_reap(stale_after_s=60)
    result["requeued"].sort()

    assert result == {
        "requeued": [dead.pk, deployed.pk],
        "failed": [dead_twice.pk],
        "resent": [],
        "rescored": [],
        "smoke_tests": [],
        "forgotten": [],
    }
    assert Run.objects.get(pk=dead.pk).status == "queued" and Run.objects.get(pk=dead.pk).lost_attempts == 1
    assert Run.objects.get(pk=deployed.pk).lost_attempts == 1
    failed = Run.objects.get(pk=dead_twice.pk)
    assert failed.status == "failed" and failed.failure_kind == "infrastructure"
    assert "stopped responding or lost the database, 2 times" in failed.error
    assert Run.objects.get(pk=alive.pk).status == "running"


@pytest.mark.django_db
def test_the_trace_exports_in_mlagentbench_shape(client, tiny_task):
    run = RunFactory(task_version=tiny_task)
    Step.objects.create(
        run=run,
        index=0,
        action="List Files",
        action_input={"dir_path": "."},
        observation="train.py\n",
        entries={"Thought": "look"},
        started_at=timezone.now(),
        low_level=[{"action": "List Files", "input": {"dir_path": "."}, "observation": "x"}],
    )

    response = client.get(reverse("runner:run_trace_json", args=[run.pk]))

    trace = json.loads(response.content)
    assert set(trace) == {"steps", "low_level_steps", "action_infos", "task_description"}
    assert trace["steps"][0]["action"] == {"name": "List Files", "args": {"dir_path": "."}}
    assert trace["steps"][0]["observation"] == "train.py\n"
    assert trace["low_level_steps"][0]["action"]["name"] == "List Files"
    assert trace["action_infos"]["Execute Script"]["usage"] == {
        "script_name": "a valid python script name with relative path to current directory if needed"
    }
    assert trace["task_description"] == tiny_task.research_problem


def run_out_of_time(version) -> Run:
    """A run limited to 4 s whose agent writes 6 to value.txt, then runs a script that sleeps a minute."""
    script = [
        act("Write File", file_name="value.txt", content="6"),
        act("Write File", file_name="slow.py", content="import time\ntime.sleep(60)\n"),
        act("Execute Script", script_name="slow.py"),
        FINAL,
    ]
    agent = AgentFactory(config={"script": script})
    return run_execute(run_create(task=version.task, agent=agent, enqueue=False, limits=RunLimits(max_time_s=4)).pk)


@pytest.mark.django_db(transaction=True)
def test_the_time_limit_ends_the_run_as_timed_out_and_the_workspace_is_still_scored(tiny_task):
    validate_now(tiny_task)
    run = run_out_of_time(tiny_task)

    assert run.status == "timed_out" and run.failure_kind == "limit"
    assert run.error == "reached the time limit of 4 s while a script ran"  # MLAgentBench's tables count it
    assert run.final_score == 6.0  # evaluated despite the limit
    last = Step.objects.filter(run=run).order_by("-index").first()
    assert last.action == "Execute Script" and "it reached its time limit" in last.observation


@pytest.mark.django_db(transaction=True)
def test_a_running_scripts_output_is_visible_before_the_step_ends(tiny_task):
    validate_now(tiny_task)
    slow = "import time\nprint('epoch 1 done', flush=True)\ntime.sleep(4)\nprint('epoch 2 done')\n"
    script = [act("Write File", file_name="slow.py", content=slow), act("Execute Script", script_name="slow.py"), FINAL]
    run = run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False)
    thread = execute_in_thread(run.pk)
    deadline = time.monotonic() + 30
    seen = ""
    while "epoch 1 done" not in seen:
        assert time.monotonic() < deadline, "the live output never showed the first line"
        time.sleep(0.2)
        seen = Run.objects.get(pk=run.pk).live_output
    assert "epoch 2 done" not in seen  # seen while the script was still running
    thread.join(timeout=30)
    run.refresh_from_db()
    assert run.status == "finished" and run.live_output == ""
    assert "epoch 2 done" in Step.objects.get(run=run, action="Execute Script").observation


@pytest.mark.django_db(transaction=True)
def test_a_script_over_the_cpu_time_limit_is_stopped_with_a_message_and_the_run_goes_on(tiny_task, settings):
    settings.BENCH_ACTION_CPU_S = 1
    settings.BENCH_ACTION_TIMEOUT_S = 20  # without the CPU limit, the script would be stopped by this one
    validate_now(tiny_task)
    script = [
        act("Write File", file_name="busy.py", content="while True:\n    pass\n"),
        act("Execute Script", script_name="busy.py"),
        act("Write File", file_name="value.txt", content="7"),
        FINAL,
    ]
    run = run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False)
    run = run_execute(run.pk)

    assert run.status == "finished" and run.final_score == 7.0
    step = Step.objects.get(run=run, action="Execute Script")
    assert "CPU time limit of 1 s" in step.observation
    assert step.detail["cpu_seconds"] >= 1


@pytest.mark.django_db(transaction=True)
def test_the_reaper_sends_again_the_runs_the_queue_could_not_take(tiny_task, baseline_agent, broker_down):
    with pytest.raises(QueueUnreachable):
        batch_create(spec=RunSpec(baseline_agent), tasks=[tiny_task.task], repeats=2)
    old = timezone.now() - timedelta(minutes=10)
    dead = RunFactory(task_version=tiny_task, status="running", attempt=1, heartbeat_at=old, sent_at=old)
    unsent = list(Run.objects.order_by("pk").values_list("pk", flat=True))

    # still down: the dead worker's run is queued again but not sent; nothing is lost
    reaped = runs_reap(stale_after_s=60, resend_after_s=0)
    assert reaped == {
        "requeued": [dead.pk], "failed": [], "resent": [], "rescored": [], "smoke_tests": [],
        "forgotten": [],
    }  # fmt: skip
    assert list(Run.objects.order_by("pk").values_list("status", "sent_at")) == [("queued", None)] * 3
    assert runs_reap()["resent"] == []  # up or not, a run queued just now is not sent again yet

    use_broker(REDIS_URL)  # the queue is back, empty
    queue = redis.Redis.from_url(REDIS_URL)
    queue.delete(celery_app.conf.task_default_queue)
    assert runs_reap(resend_after_s=0)["resent"] == unsent
    assert queue.llen(celery_app.conf.task_default_queue) == 3
    assert all(run.sent_at is not None for run in Run.objects.all())
    assert runs_reap(resend_after_s=0)["resent"] == []  # sent once is enough: a worker claims it from the queue


def _slow_task(tmp_path, *, train_sleep: float = 0, eval_sleep: float = 0):
    """The tiny task with a starter script and an eval.py that take their time."""
    from task_bank.services import task_import
    from tests.factories import TINY_FILES, package_write

    files = dict(TINY_FILES)
    files["env/train.py"] = f"import time\ntime.sleep({train_sleep})\n" + "open('value.txt', 'w').write('2.0')\n"
    files["scripts/eval.py"] = (
        "import os\nimport time\n\n\ndef get_score(submission_folder='../env'):\n"
        f"    time.sleep({eval_sleep})\n"
        "    with open(os.path.join(submission_folder, 'value.txt')) as fh:\n"
        "        return float(fh.read())\n"
    )
    version, _ = task_import(root=package_write(tmp_path / "slow", files), slug="slow")
    return version


@pytest.mark.django_db(transaction=True)
def test_a_timed_out_run_is_scored_however_long_its_evaluation_takes(tmp_path):
    """The time limit is the agent's: the evaluation of what it left runs on its own timeout, not the expired
    deadline (an evaluation longer than a tick was cut short and the run left unscored)."""
    version = _slow_task(tmp_path, eval_sleep=3)
    validate_now(version)
    run = run_out_of_time(version)

    assert run.status == "timed_out" and run.failure_kind == "limit"
    assert run.final_score == 6.0 and run.eval_error == ""


@pytest.mark.django_db(transaction=True)
def test_time_spent_waiting_for_the_tasks_validation_is_not_the_runs(tmp_path):
    """A benchmark run of a version nobody validated waits for the round that measures its baseline: that wait is
    the platform's, so it neither ends the run at its time limit nor counts in its time."""
    version = _slow_task(tmp_path, train_sleep=2)  # three baseline runs: longer than the run's limit
    run = run_create(
        task=version.task, agent=AgentFactory(config={"script": [FINAL]}), enqueue=False, limits=RunLimits(max_time_s=5)
    )
    run = run_execute(run.pk)

    assert run.task_version.status == "ready"
    assert (run.status, run.failure_kind, run.error) == ("finished", "", "")
    assert run.paused_seconds >= 6  # three baseline runs of a 2 s script: not the run's time
