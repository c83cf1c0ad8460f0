"""What a run and a submitter may store: a run's new files (after deduplication, on disk) count against
BENCH_RUN_MAX_STORED_MB, where they are stored (each step's snapshot), and all the runs of one owner's agents against
BENCH_USER_MAX_STORED_MB; past either the run ends at a limit (what it left is scored), and no new run of the
owner's agents is queued nor a log of theirs imported."""

import secrets

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from core.shared_cache import counts_clear
from runner.execution import run_execute
from runner.models import Run, RunSpec, Step
from runner.services import RunRequestError, batch_create, run_create
from tests.factories import AgentFactory, RunFactory
from tests.runner.logs.test_log_import import write_log, zip_folder


def write(name: str, content: str) -> dict:
    return {"type": "act", "action": "Write File", "input": {"file_name": name, "content": content}}


FINAL = {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}}


@pytest.mark.django_db(transaction=True)
def test_a_run_that_stores_more_than_a_run_may_ends_at_a_limit_and_what_it_left_is_scored(tiny_task, settings):
    settings.BENCH_RUN_MAX_STORED_MB = 1
    # Each step writes a file of its own that nothing else holds: 600 kB of random hex, about 330 kB packed.
    script = [write("value.txt", "5.0")] + [write(f"out-{n}.txt", secrets.token_hex(300_000)) for n in range(8)]
    agent = AgentFactory(config={"script": [*script, FINAL]})
    run = run_execute(run_create(task=tiny_task.task, agent=agent, enqueue=False).pk)

    assert (run.status, run.failure_kind) == ("failed", "limit")
    assert "more than a run may store (1 MB, BENCH_RUN_MAX_STORED_MB)" in run.error
    assert 1 << 20 < run.stored_bytes < 3 << 20  # the step that went over is kept, nothing after it
    assert 3 <= run.steps_count < 9
    assert not Step.objects.filter(run=run, action="Final Answer").exists()
    assert run.final_score == 5.0  # scored on what the agent left


@pytest.mark.django_db(transaction=True)
def test_a_file_stored_already_costs_a_run_nothing(tiny_task, settings):
    settings.BENCH_RUN_MAX_STORED_MB = 1
    same = secrets.token_hex(300_000)
    script = [write("value.txt", "5.0")] + [write(f"copy-{n}.txt", same) for n in range(8)]  # one content
    run = run_execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": [*script, FINAL]})).pk)

    assert (run.status, run.steps_count) == ("finished", 10), run.error
    assert 0 < run.stored_bytes < 1 << 20


@pytest.mark.django_db(transaction=True)
def test_past_what_an_owners_runs_may_store_a_run_ends_and_no_new_run_or_log_of_theirs_is_taken(
    tiny_task_ready, settings, people, client, tmp_path
):
    settings.BENCH_USER_MAX_STORED_MB = 2
    owner = people["owner"]
    RunFactory(task_version=tiny_task_ready, agent=AgentFactory(owner=owner), stored_bytes=(2 << 20) - 300_000)
    script = [write("value.txt", "5.0")] + [write(f"out-{n}.txt", secrets.token_hex(300_000)) for n in range(4)]
    agent = AgentFactory(owner=owner, config={"script": [*script, FINAL]})
    run = run_execute(run_create(task=tiny_task_ready.task, agent=agent, enqueue=False).pk)

    assert (run.status, run.failure_kind) == ("failed", "limit")
    assert "more than one submitter's runs may store together (2 MB, BENCH_USER_MAX_STORED_MB)" in run.error

    with pytest.raises(RunRequestError, match="store together .2 MB, BENCH_USER_MAX_STORED_MB.; deleting runs"):
        batch_create(spec=RunSpec(agent), tasks=[tiny_task_ready.task], enqueue=False)
    others = AgentFactory(owner=people["stranger"], config={"script": [FINAL]})
    assert batch_create(spec=RunSpec(others), tasks=[tiny_task_ready.task], enqueue=False)[1]  # someone else's: taken

    counts_clear()
    client.force_login(owner)
    log = zip_folder(write_log(tmp_path / "run-a"), tmp_path / "run-a.zip").read_bytes()
    refused = client.post(
        "/api/v1/logs/", {"log": SimpleUploadedFile("run.zip", log, "application/zip"), "task": "tiny"}
    )
    assert refused.status_code == 400
    assert "the log cannot be stored: the runs of this agent's owner store" in refused.content.decode()
    assert not Run.objects.filter(origin="self_reported").exists()

    Run.objects.filter(agent__owner=owner).delete()  # deleting runs frees their space
    assert batch_create(spec=RunSpec(agent), tasks=[tiny_task_ready.task], enqueue=False)[1]


@pytest.mark.django_db
def test_the_run_page_and_the_account_page_show_what_is_stored_against_its_limit(client, people, tiny_task, settings):
    settings.BENCH_RUN_MAX_STORED_MB, settings.BENCH_USER_MAX_STORED_MB = 64, 512
    run = RunFactory(task_version=tiny_task, agent=AgentFactory(owner=people["owner"]), stored_bytes=3 << 20)
    client.force_login(people["owner"])

    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "3.0\xa0MB of new files (at most 64 MB)" in page
    assert "3.0 MB of files your agents' runs stored, of at most 512 MB" in client.get("/account/").content.decode()
    assert client.get(f"/api/v1/runs/{run.pk}/").json()["stored_bytes"] == 3 << 20
