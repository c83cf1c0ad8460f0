import pytest
from django.urls import reverse

from runner.execution import run_execute
from runner.execution.preparation import task_version_prepare
from runner.services import run_create
from tests.factories import AgentFactory, RunFactory


def test_the_task_list_shows_metric_baseline_runs_and_best(client, tiny_task):
    tiny_task.baseline_score = 2.0
    tiny_task.status = "ready"
    tiny_task.save()
    RunFactory(task_version=tiny_task, final_score=3.5)
    RunFactory(task_version=tiny_task, final_score=7.25)

    html = client.get(reverse("leaderboard:task_list")).content.decode()

    assert "Tiny" in html and "value" in html and "higher is better" in html
    assert "2.0000" in html and "7.2500" in html


def test_the_task_page_shows_problem_files_and_leaderboard_but_hides_hidden_files(client, admin_client, tiny_task):
    task_version_prepare(tiny_task)
    tiny_task.baseline_score = 2.0
    tiny_task.save()
    agent = AgentFactory(name="solver")
    RunFactory(task_version=tiny_task, agent=agent, final_score=3.0, improvement=0.5, succeeded=True)
    RunFactory(task_version=tiny_task, agent=agent, final_score=2.1, improvement=0.05, succeeded=False)
    url = reverse("leaderboard:task_detail", args=["tiny"])

    html = client.get(url).content.decode()
    assert "Make value.txt hold a larger number" in html
    assert "<code>train.py</code>" in html and "<code>data.txt</code>" in html
    assert "solver@1" in html and "50.0% [9.5–90.5] n=2" in html  # one success out of two runs
    assert "answer.txt" not in html and "eval.py" not in html

    staff_html = admin_client.get(url).content.decode()
    assert "scripts/answer.txt" in staff_html and "scripts/eval.py" in staff_html


@pytest.mark.django_db(transaction=True)
def test_the_task_page_counts_only_runs_of_the_current_version(client, tiny_task):
    agent = AgentFactory(config={"script": [{"type": "act", "action": "Final Answer", "input": {"final_answer": "x"}}]})
    run_execute(run_create(task=tiny_task.task, agent=agent, enqueue=False).pk)

    html = client.get(reverse("leaderboard:task_list")).content.decode()
    assert '<td class="num">1</td>' in html  # the benchmark run; the validation run is not counted


def test_a_failed_validation_log_is_shown_to_staff_only(client, admin_client, tiny_task):
    tiny_task.status = "failed"
    tiny_task.validation_log = 'Traceback:\n  File "/task/scripts/eval.py"\n    answer = 42\nValueError: bad'
    tiny_task.save()
    url = reverse("leaderboard:task_detail", args=["tiny"])

    assert client.get(url).status_code == 404  # a failed version is staff's to mend, not the public's to read
    html = admin_client.get(url).content.decode()
    assert "Validation failed" in html and "answer = 42" in html


@pytest.mark.django_db(transaction=True)
def test_mlagentbenchs_tasks_page_says_what_each_needs_and_which_are_ready_here(
    client, admin_client, tmp_path, settings
):
    from task_bank.services import task_import
    from tests.factories import TINY_FILES, package_write, validate_now
    from tests.runner.execution.test_task_validation import CRASHING_SCRIPT

    bare = {rel: text for rel, text in TINY_FILES.items() if rel != "task.toml"} | {"env/train.py": CRASHING_SCRIPT}
    for folder in ("house-price", "vectorization"):  # its starter fails by design; its starter must run
        version, _ = task_import(root=package_write(tmp_path / folder, bare), metric_name="v", higher_is_better=False)
        validate_now(version)

    page = client.get(reverse("leaderboard:mlagentbench_tasks")).content.decode()
    assert page.count("<tr>") == 14  # the header and MLAgentBench's 13 folders
    assert 'href="/tasks/house-price/">house-price</a>' in page and "Ready" in page
    assert "a Kaggle competition&#x27;s files (home-data-for-ml-course)" in page
    assert "needed" in page  # llama-inference's GPU
    assert "the platform's own packages only" in page  # the suite's BENCH_BARE_FOLDER_PACKAGES
    assert 'href="/tasks/vectorization/"' not in page  # a failed task is staff's to see
    staff = admin_client.get(reverse("leaderboard:mlagentbench_tasks")).content.decode()
    assert 'href="/tasks/vectorization/"' in staff and "the starter script train.py failed: ValueError" in staff
    assert reverse("leaderboard:mlagentbench_tasks") in client.get(reverse("leaderboard:task_list")).content.decode()
    settings.BENCH_BARE_FOLDER_PACKAGES = "mlagentbench"
    page = client.get(reverse("leaderboard:mlagentbench_tasks")).content.decode()
    assert "MLAgentBench's Python environment of October 2023 (113 packages, each" in page


def test_a_baseline_measured_again_says_so_not_the_mean_of_no_runs(client, tiny_task):
    # as while its validation runs again: the old value, no scores of this round
    tiny_task.baseline_score, tiny_task.baseline_scores, tiny_task.status = 2.0, [], "validating"
    tiny_task.save(update_fields=["baseline_score", "baseline_scores", "status"])
    page = client.get(reverse("leaderboard:task_detail", args=[tiny_task.task.slug])).content.decode()
    assert "the mean of 0 runs" not in page and "relative spread —" not in page
    assert "measured before; measured again: its validation runs now" in page


def test_a_task_nobody_has_validated_says_when_it_will_be(client, tiny_task):
    # as a slow built-in task the demo leaves out: no validation queued
    tiny_task.status, tiny_task.validation_repeats = "pending", 3
    tiny_task.save(update_fields=["status", "validation_repeats"])
    page = client.get(reverse("leaderboard:task_detail", args=[tiny_task.task.slug])).content.decode()
    assert "not measured yet (Not validated):" in page
    assert "3 runs of its baseline measure it before the first run asked of it" in page


def test_a_task_waiting_for_its_validation_says_how_many_runs_are_ahead_and_about_how_long(client, tiny_task, tmp_path):
    from datetime import timedelta

    from django.utils import timezone

    from runner.jobs import queue_name
    from runner.models import Run, Worker
    from task_bank.services import task_import
    from tests.factories import package_write

    slow, _ = task_import(root=package_write(tmp_path / "slow"), slug="slow")
    now = timezone.now()
    for _ in range(2):  # ended lately on the demo's queue: 2 minutes a run of tiny
        RunFactory(task_version=tiny_task, queue="demo", wall_seconds=120, finished_at=now - timedelta(minutes=5))
    RunFactory(task_version=slow, queue="demo", wall_seconds=600, finished_at=now)  # and 10 minutes one of slow
    for version in (tiny_task, tiny_task, slow):  # queued first, on the demo's queue
        RunFactory(task_version=version, queue="demo", status=Run.Status.QUEUED)
    RunFactory(task_version=tiny_task, queue="demo", status=Run.Status.QUEUED, purpose=Run.Purpose.VALIDATION)
    url = reverse("leaderboard:task_detail", args=[tiny_task.task.slug])
    page = client.get(url).content.decode()
    # Each run ahead at its own task's time: 2 + 2 + 10 minutes, not 3 runs at the queue's mean.
    assert "its validation waits for a worker of the demo runs: 3 runs ahead of it, about 14 min by their " in page
    Worker.objects.create(name="demo@h", queues=[queue_name("demo")], pid=1, concurrency=2, started_at=now,
                          heartbeat_at=now)  # fmt: skip
    page = client.get(url).content.decode()
    assert "3 runs ahead of it, about 7 min by their tasks&#x27; run times so far over 2 runs at a time" in page
    Run.objects.filter(purpose=Run.Purpose.VALIDATION).update(status=Run.Status.RUNNING)
    page = client.get(reverse("leaderboard:task_detail", args=[tiny_task.task.slug])).content.decode()
    assert "its validation runs now" in page
