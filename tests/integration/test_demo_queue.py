"""The first start's demo on a queue of its own: the Procfile's worker never takes a demo run, so a person's run does
not wait behind the demo, and the Procfile's demo worker works through the demo in order."""

import importlib.util

import pytest
from django.core.management import call_command

from runner.models import Run, RunSpec
from runner.services import batch_create
from task_bank.models import Task
from tests.integration.conftest import ROOT
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

spec = importlib.util.spec_from_file_location("bench_procfile", ROOT / "benchmarks" / "procfile.py")
procfile = importlib.util.module_from_spec(spec)
spec.loader.exec_module(procfile)


def test_a_persons_run_never_waits_behind_the_demo(worker_env, tmp_path, settings):
    settings.VAR_DIR = tmp_path
    call_command("bench_init")
    demo = Run.objects.filter(queue=Run.Queue.DEMO)
    first_tuner = demo.filter(agent__name="tuner").order_by(*Run.QUEUE_ORDER).first()
    digits = Task.objects.get(slug="digits")
    env = procfile.process_env(**{k: v for k, v in worker_env.items() if k in procfile.SERVICE_VARIABLES})

    worker = procfile.worker_start(env, node="persons", log_path=tmp_path / "worker.log")
    try:
        _, (mine,) = batch_create(spec=RunSpec(first_tuner.agent), tasks=[digits])
        wait_for(lambda: not Run.objects.get(pk=mine.pk).is_live, 600, "the person's run to end")
    finally:
        procfile.process_stop(worker)
    mine.refresh_from_db()
    assert mine.status == Run.Status.FINISHED and mine.worker.startswith("persons@"), mine.error
    # The only demo runs it took are the validation round its own run needed (digits' baseline); the rest wait.
    taken = demo.exclude(status=Run.Status.QUEUED)
    assert set(taken.values_list("task__slug", "purpose")) <= {("digits", Run.Purpose.VALIDATION)}
    assert demo.filter(status=Run.Status.QUEUED).count() == demo.count() - taken.count() > 20

    # The demo's worker takes the demo's next run, in the order queued: a validation round (every task's comes before
    # any tuner run).
    following = demo.filter(status=Run.Status.QUEUED).order_by(*Run.QUEUE_ORDER).first()
    assert following.purpose == Run.Purpose.VALIDATION
    demo_worker = procfile.worker_start(env, log_path=tmp_path / "demo.log", line="demo")
    try:
        wait_for(lambda: not Run.objects.get(pk=following.pk).is_live, 600, "the demo's next run to end")
    finally:
        procfile.process_stop(demo_worker)
    following.refresh_from_db()
    assert following.status == Run.Status.FINISHED, following.error
    assert following.worker.startswith("demo@")  # the Procfile's demo line names its worker
