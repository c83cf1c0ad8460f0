"""/runs/import/: a signed-in user imports an MLAgentBench log on the site, as POST /api/v1/logs/ does."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from core.shared_cache import counts_clear
from runner.models import Agent, Run
from runner.throttles import LogUploadThrottle
from tests.factories import AgentFactory
from tests.runner.logs.test_log_import import write_log, zip_folder

URL = "/runs/import/"


@pytest.fixture
def log_zip(tmp_path) -> bytes:
    return zip_folder(write_log(tmp_path / "run-a"), tmp_path / "run-a.zip").read_bytes()


@pytest.fixture(autouse=True)
def fresh_throttle(db):
    counts_clear()  # the throttle counts in the shared cache
    yield
    counts_clear()


def post(client, data: bytes, name: str = "run.zip", **fields):
    return client.post(URL, {"log": SimpleUploadedFile(name, data, "application/zip"), **fields})


@pytest.mark.django_db(transaction=True)
def test_a_log_uploaded_on_the_site_becomes_a_self_reported_run_of_a_new_agent_of_theirs(
    tiny_task_ready, log_zip, client, people
):
    client.force_login(people["stranger"])
    page = client.get(URL)
    assert page.status_code == 200 and b'<option value="tiny">' in page.content  # enabled tasks are offered

    response = post(client, log_zip, task="tiny", agent="my-agent", model="gpt-x")

    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert (run.origin, run.agent.name, run.model, run.steps_count, run.final_score) == (
        Run.Origin.SELF_REPORTED,
        "my-agent",
        "gpt-x",
        3,
        None,  # scored by a worker's job (test_import_scoring.py)
    )
    assert run.score_pending_since is not None
    assert Agent.objects.get(name="my-agent").owner == people["stranger"]
    assert b"self-reported" in client.get(response["Location"]).content


@pytest.mark.django_db(transaction=True)
def test_a_bad_log_or_another_ones_agent_is_refused_with_the_reason_and_nothing_is_kept(
    tiny_task_ready, log_zip, client, people
):
    AgentFactory(name="research", owner=None)
    client.force_login(people["stranger"])

    not_zip = post(client, b"plain text", name="run.txt", task="tiny")
    broken = post(client, b"not a zip at all", task="tiny")
    theirs = post(client, log_zip, task="tiny", agent="research")

    assert not_zip.status_code == 400 and b"run.txt is not a .zip file" in not_zip.content
    assert broken.status_code == 400 and b"not a zip file" in broken.content
    assert theirs.status_code == 400 and b"is not yours" in theirs.content
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_form_offers_only_ready_tasks_and_its_default_agent_is_one_the_uploader_may_use(
    tiny_task, log_zip, client, people
):
    client.force_login(people["stranger"])
    assert b'<option value="tiny">' not in client.get(URL).content  # not validated yet: an upload would be refused
    tiny_task.status, tiny_task.baseline_score = tiny_task.Status.READY, 2.0
    tiny_task.save(update_fields=["status", "baseline_score"])
    page = client.get(URL).content.decode()
    assert '<option value="tiny">' in page and "stranger-mlagentbench-log" in page

    AgentFactory(name="mlagentbench-log", owner=None)  # the shared default, someone else's
    first = post(client, log_zip, task="tiny")  # no agent named: the form's default, which is the uploader's
    assert first.status_code == 302, first.content.decode()[-2000:]
    run = Run.objects.get()
    assert (run.agent.name, run.agent.owner) == ("stranger-mlagentbench-log", people["stranger"])
    assert b"--agent" not in post(client, log_zip, task="tiny", agent="mlagentbench-log").content


@pytest.mark.django_db
def test_visitors_are_sent_to_sign_in(client):
    response = client.get(URL)

    assert response.status_code == 302 and response["Location"].startswith("/account/login/")
    assert b"Import a run" not in client.get("/runs/").content


@pytest.mark.django_db(transaction=True)
def test_uploads_are_throttled_per_user_on_the_site_and_the_api(tiny_task_ready, log_zip, client, people, monkeypatch):
    monkeypatch.setattr(LogUploadThrottle, "THROTTLE_RATES", {"log_uploads": "1/hour"})
    client.force_login(people["stranger"])
    assert post(client, log_zip, task="tiny", agent="my-agent").status_code == 302

    again = post(client, log_zip, task="tiny", agent="my-agent")
    api = client.post("/api/v1/logs/", {"log": SimpleUploadedFile("run.zip", log_zip), "task": "tiny"})

    assert again.status_code == 429 and b"too many uploads" in again.content
    assert api.status_code == 429
    assert Run.objects.count() == 1
