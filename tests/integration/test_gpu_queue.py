"""GPU runs on their own queue, with real workers: a worker serving the CPU queues never starts a GPU run (it
waits), and a worker serving the GPU queue alone starts it and no CPU run."""

import random
import string
from pathlib import Path

import pytest

from runner.models import Run
from runner.services import run_create
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, package_write
from tests.integration.conftest import start_worker, stop_worker
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

FINAL = [
    {"type": "act", "action": "Write File", "input": {"file_name": "value.txt", "content": "3"}},
    {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
]


def status(run: Run) -> str:
    return Run.objects.get(pk=run.pk).status


def test_a_gpu_run_waits_for_a_gpu_worker_and_a_gpu_worker_takes_only_gpu_runs(
    worker_env, celery_test_queue, tiny_task, tmp_path
):
    files = dict(TINY_FILES, **{"task.toml": TINY_FILES["task.toml"] + "\n[resources]\ngpus = 1\n"})
    gpu_task, _ = task_import(root=package_write(tmp_path / "gpu", files), slug="tiny-gpu")
    agent = AgentFactory(config={"script": FINAL})

    gpu_run = run_create(task=gpu_task.task, agent=agent)  # queued first
    cpu_run = run_create(task=tiny_task.task, agent=agent)
    cpu_worker = start_worker(worker_env, tmp_path / "cpu.log", celery_test_queue, kinds=("", "-short"))
    try:
        wait_for(lambda: status(cpu_run) == Run.Status.FINISHED, 180, "the CPU run to finish")
        assert status(gpu_run) == Run.Status.QUEUED
    finally:
        stop_worker(cpu_worker)

    later_cpu_run = run_create(task=tiny_task.task, agent=agent)
    # No GPU here: a file stands in for its device file (the sandbox binds it; tests/runner/sandbox has the rest).
    device = Path(f"/dev/shm/{''.join(random.choices(string.ascii_lowercase, k=12))}-nvidia0")
    device.write_text("")
    env = {**worker_env, "BENCH_GPU_DEVICES": f"{str(device)[:-1]}[0-9]*"}
    gpu_worker = start_worker(env, tmp_path / "gpu.log", celery_test_queue, kinds=("-gpu",))
    try:
        wait_for(lambda: status(gpu_run) == Run.Status.FINISHED, 180, "the GPU run to finish")
    finally:
        stop_worker(gpu_worker)
        device.unlink()
    finished = Run.objects.get(pk=gpu_run.pk)
    assert finished.final_score == 3.0 and finished.worker.startswith("test-")
    assert "gpu" in finished.worker
    assert status(later_cpu_run) == Run.Status.QUEUED  # the GPU worker left it for a CPU worker
