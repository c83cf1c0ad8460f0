"""A run's Celery job has a time limit of its own (BENCH_RUN_JOB_TIME_LIMIT_S): a run still going at it is handed
back to the queue and resumed by the next job from its last recorded step, until it finishes; every step is
recorded once."""

import time

import pytest

from runner.models import Run, Step
from runner.services import run_create
from task_bank.models import TaskVersion
from tests.factories import AgentFactory
from tests.integration.conftest import start_worker, stop_worker

pytestmark = pytest.mark.integration

SLOW = "import time\ntime.sleep(2)\nprint('slept')\n"


def act(action: str, **args) -> dict:
    return {"type": "act", "action": action, "input": args}


def test_a_run_longer_than_its_job_s_time_limit_is_resumed_by_the_next_job(
    worker_env, celery_test_queue, tiny_task, tmp_path, settings
):
    # A run job's limits travel with its message, set from the sending process's settings.
    settings.BENCH_RUN_JOB_TIME_LIMIT_S = 5
    TaskVersion.objects.filter(pk=tiny_task.pk).update(status=TaskVersion.Status.READY, baseline_score=2.0)
    script = [act("Write File", file_name="slow.py", content=SLOW)]
    script += [act("Execute Script", script_name="slow.py") for _ in range(4)]
    script += [act("Write File", file_name="value.txt", content="3"), act("Final Answer", final_answer="done")]
    run = run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}))
    worker = start_worker(worker_env, tmp_path / "worker.log", celery_test_queue)
    try:
        deadline = time.monotonic() + 240
        while not Run.objects.get(pk=run.pk).has_ended and time.monotonic() < deadline:
            time.sleep(0.3)
    finally:
        stop_worker(worker)
    run.refresh_from_db()
    log = (tmp_path / "worker.log").read_text()
    assert run.status == Run.Status.FINISHED and run.final_score == 3.0, (run.error, log[-3000:])
    assert run.attempt >= 2  # handed back at least once, and resumed
    assert "reached the job time limit; handing the run back" in log
    indexes = list(Step.objects.filter(run=run).order_by("index").values_list("index", flat=True))
    assert indexes == list(range(len(script)))
