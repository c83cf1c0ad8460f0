"""Queues by kind of work: agent runs (validation runs too), short jobs (step scoring, the reaper) and GPU runs each
go to a job queue of their own, a message claims only a run of its kind, and the reaper counts and resends per queue."""

import base64
import json

import pytest
import redis

from bench.celery import app as celery_app
from runner.execution import run_claim_next
from runner.execution.reaper import runs_resend
from runner.execution.validation import task_version_validate_queue
from runner.jobs import (
    SCORE_STEP,
    import_score_send,
    job_send,
    messages_waiting,
    queue_name,
    queue_names,
    smoke_test_send,
)
from runner.services import run_create, run_fork
from task_bank.services import task_import
from tests.brokers import use_broker
from tests.factories import TINY_FILES, AgentFactory, StepFactory, package_write
from tests.integration.conftest import REDIS_URL

pytestmark = pytest.mark.django_db


@pytest.fixture
def gpu_task(tmp_path):
    """A tiny task whose task.toml asks for one GPU."""
    files = dict(TINY_FILES, **{"task.toml": TINY_FILES["task.toml"] + "\n[resources]\ngpus = 1\n"})
    version, _ = task_import(root=package_write(tmp_path / "gpu", files), slug="tiny-gpu")
    return version


@pytest.fixture
def redis_queues(celery_test_queue):
    """This test session's queues on Redis, empty; the raw Redis client to look into them."""
    old = celery_app.conf.broker_url
    use_broker(REDIS_URL)
    client = redis.Redis.from_url(REDIS_URL)
    client.delete(*queue_names())
    yield client
    client.delete(*queue_names())
    use_broker(old)


def messages(client: redis.Redis, queue: str) -> list[tuple[str, list, dict]]:
    """(job name, args, kwargs) of each message waiting in a queue, oldest first."""
    found = []
    for raw in reversed(client.lrange(queue, 0, -1)):
        message = json.loads(raw)
        args, kwargs, _ = json.loads(base64.b64decode(message["body"]))
        found.append((message["headers"]["task"], args, kwargs))
    return found


def test_a_run_is_sent_to_the_queue_of_its_kind_naming_it(
    tiny_task, gpu_task, baseline_agent, redis_queues, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        cpu = run_create(task=tiny_task.task, agent=baseline_agent)
        gpu = run_create(task=gpu_task.task, agent=baseline_agent)
        validation = task_version_validate_queue(version=tiny_task, repeats=1)[0]
        demo = run_create(task=tiny_task.task, agent=baseline_agent, demo=True)
        gpu_demo = run_create(task=gpu_task.task, agent=baseline_agent, demo=True)  # a GPU is what it needs first
    assert (cpu.queue, gpu.queue, validation.queue, demo.queue, gpu_demo.queue) == (
        "runs",
        "gpu",
        "runs",
        "demo",
        "gpu",
    )

    assert messages(redis_queues, queue_name("runs")) == [
        ("runner.execute_run", [cpu.pk], {"queue": "runs"}),
        ("runner.execute_run", [validation.pk], {"queue": "runs"}),
    ]
    assert messages(redis_queues, queue_name("gpu")) == [
        ("runner.execute_run", [gpu.pk], {"queue": "gpu"}),
        ("runner.execute_run", [gpu_demo.pk], {"queue": "gpu"}),
    ]
    assert messages(redis_queues, queue_name("demo")) == [("runner.execute_run", [demo.pk], {"queue": "demo"})]
    assert redis_queues.llen(queue_name("short")) == 0  # a validation runs a starter script to its end: no short job
    assert queue_names() == [celery_app.conf.task_default_queue + s for s in ("", "-short", "-gpu", "-demo")]


def test_a_fork_and_a_validation_of_a_gpu_task_need_the_gpu_queue_too(gpu_task, baseline_agent):
    validation = task_version_validate_queue(version=gpu_task, repeats=1, enqueue=False)[0]
    assert validation.queue == "gpu"
    run = run_create(task=gpu_task.task, agent=baseline_agent, enqueue=False)
    StepFactory(run=run, index=0)
    assert run_fork(run=run, step_index=0).queue == "gpu"


def test_a_message_claims_the_first_queued_run_of_its_kind_only(tiny_task, gpu_task, baseline_agent):
    gpu = run_create(task=gpu_task.task, agent=baseline_agent, enqueue=False)  # queued first
    cpu = run_create(task=tiny_task.task, agent=baseline_agent, enqueue=False)

    assert run_claim_next(worker="cpu", queue="runs").pk == cpu.pk  # the GPU run queued before it is not its kind
    assert run_claim_next(worker="cpu", queue="runs") is None
    assert run_claim_next(worker="cpu", queue="short") is None
    assert run_claim_next(worker="gpu", queue="gpu").pk == gpu.pk


def test_short_jobs_go_to_the_short_queue(tiny_task, redis_queues):
    run = run_create(task=tiny_task.task, agent=AgentFactory(), enqueue=False)
    step = StepFactory(run=run, index=0)
    job_send(SCORE_STEP, step.pk)
    smoke_test_send(run.agent_id)
    celery_app.send_task("runner.collect_blobs")
    jobs = [name for name, _, _ in messages(redis_queues, queue_name("short"))]
    assert jobs == ["runner.score_step", "runner.smoke_test", "runner.collect_blobs"]
    assert redis_queues.llen(queue_name("runs")) == 0


def test_an_imported_runs_scoring_goes_to_the_queue_of_its_kind_of_run(tiny_task, gpu_task, redis_queues):
    """It re-runs the uploaded script for a timed task: run-sized work, kept off the short queue and its reaper."""
    cpu = run_create(task=tiny_task.task, agent=AgentFactory(), enqueue=False)
    gpu = run_create(task=gpu_task.task, agent=AgentFactory(), enqueue=False)
    import_score_send(cpu.pk)
    import_score_send(gpu.pk)
    assert messages(redis_queues, queue_name("runs")) == [("runner.score_import", [cpu.pk], {})]
    assert messages(redis_queues, queue_name("gpu")) == [("runner.score_import", [gpu.pk], {})]
    assert redis_queues.llen(queue_name("short")) == 0


def test_the_reaper_counts_and_resends_each_queue_apart(
    tiny_task, gpu_task, baseline_agent, redis_queues, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        cpu = [run_create(task=tiny_task.task, agent=baseline_agent) for _ in range(2)]
        gpu = run_create(task=gpu_task.task, agent=baseline_agent)
    assert (messages_waiting("runs"), messages_waiting("gpu"), messages_waiting("short")) == (2, 1, 0)
    assert runs_resend(resend_after_s=0) == []

    # The GPU queue loses its message; two messages too many wait on the runs queue: they do not stand for it.
    redis_queues.delete(queue_name("gpu"))
    redis_queues.lpush(queue_name("runs"), *redis_queues.lrange(queue_name("runs"), 0, -1))
    assert runs_resend(resend_after_s=0) == [gpu.pk]
    assert messages(redis_queues, queue_name("gpu")) == [("runner.execute_run", [gpu.pk], {"queue": "gpu"})]
    assert runs_resend(resend_after_s=0) == []
    assert len(cpu) == 2


def test_every_job_has_a_time_limit_and_runs_are_acknowledged_late():
    jobs = {name: task for name, task in celery_app.tasks.items() if name.startswith("runner.")}
    assert set(jobs) == {
        "runner.execute_run", "runner.score_step", "runner.score_import", "runner.smoke_test", "runner.collect_blobs",
    }  # fmt: skip
    for name, task in jobs.items():
        assert task.soft_time_limit and task.time_limit > task.soft_time_limit, name
    assert celery_app.tasks["runner.execute_run"].acks_late
    assert celery_app.conf.worker_prefetch_multiplier == 1


def test_a_message_sent_to_one_of_the_configured_queues_reaches_that_queue_alone(redis_queues):
    """The queues a worker declares (CELERY_TASK_QUEUES) are bound each to its own name: a message for the GPU
    queue is not copied into the runs' and the short jobs' queues too."""
    configured = [queue.name for queue in celery_app.conf.task_queues]
    with celery_app.connection_for_write() as connection:
        channel = connection.default_channel
        for name in configured:
            celery_app.amqp.queues[name](channel).declare()  # as a worker serving every queue does
            channel.queue_purge(name)
        try:
            for name in configured:  # through the exchange and routing key the queue is declared with
                queue = celery_app.amqp.queues[name]
                celery_app.send_task(
                    "runner.collect_blobs", exchange=queue.exchange.name, routing_key=queue.routing_key
                )
            assert [redis_queues.llen(name) for name in configured] == [1, 1, 1]
        finally:
            for name in configured:
                channel.queue_purge(name)


def test_a_collector_pass_not_started_within_its_period_is_dropped(redis_queues, settings):
    """The collector's messages expire after one period: after the short jobs' workers were busy or down, one pass
    runs, not a backlog of them at once."""
    from runner.execution.workers import collect_send

    collect_send()
    (raw,) = redis_queues.lrange(queue_name("short"), 0, -1)
    expires = json.loads(raw)["headers"]["expires"]
    assert expires is not None
