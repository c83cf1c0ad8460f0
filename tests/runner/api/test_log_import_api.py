"""POST /api/v1/logs/: a signed-in user imports an MLAgentBench log as a self-reported run of their own agent."""

from __future__ import annotations

import re
import tempfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from runner.models import Agent, Run
from tests.factories import AgentFactory
from tests.runner.logs.test_log_import import write_log, zip_folder
from tests.task_bank.test_curation import ZIP_TRICKS

URL = "/api/v1/logs/"


@pytest.fixture
def log_zip(tmp_path) -> bytes:
    return zip_folder(write_log(tmp_path / "run-a"), tmp_path / "run-a.zip").read_bytes()


def upload(client, data: bytes, **fields):
    return client.post(URL, {"log": SimpleUploadedFile("run.zip", data, "application/zip"), **fields})


@pytest.mark.django_db(transaction=True)
def test_a_signed_in_user_imports_a_log_under_a_new_agent_of_their_own(tiny_task_ready, log_zip, client, people):
    client.force_login(people["stranger"])

    response = upload(client, log_zip, task="tiny", agent="my-agent", model="gpt-x")

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["origin"], body["agent"], body["steps_count"]) == ("imported", "my-agent", 3)
    assert (body["final_score"], body["score_pending"]) == (None, True)  # scored by a worker's job
    agent = Agent.objects.get(name="my-agent")
    assert agent.owner == people["stranger"] and agent.kind == Agent.Kind.EXTERNAL


@pytest.mark.django_db(transaction=True)
def test_nobody_files_runs_under_an_agent_that_is_not_theirs_but_staff(tiny_task_ready, log_zip, client, people):
    AgentFactory(name="research", owner=None)
    client.force_login(people["stranger"])

    response = upload(client, log_zip, task="tiny", agent="research")

    assert response.status_code == 400 and "is not yours" in response.json()["log"][0]
    assert not Run.objects.exists()
    client.force_login(people["staff"])
    assert upload(client, log_zip, task="tiny", agent="research").status_code == 201


@pytest.mark.django_db(transaction=True)
def test_nobody_adds_a_version_to_an_agent_that_is_not_theirs_nor_to_one_with_code(
    tiny_task_ready, log_zip, client, people
):
    """A new version would become the agent's newest: shown as its owner's, and run in its place."""
    theirs = AgentFactory(name="theirs", owner=people["staff"])
    mine = AgentFactory(name="mine", owner=people["stranger"])
    client.force_login(people["stranger"])

    response = upload(client, log_zip, task="tiny", agent="theirs@999")
    assert response.status_code == 400 and "is not yours" in response.json()["log"][0]
    response = upload(client, log_zip, task="tiny", agent="mine@2")  # their own, but it has code: uploads make versions
    assert response.status_code == 400 and "has no version '2' (its versions: 1)" in response.json()["log"][0]
    client.force_login(people["staff"])
    assert upload(client, log_zip, task="tiny", agent="mine@2").status_code == 400  # staff neither
    assert not Run.objects.exists()
    assert list(Agent.objects.filter(name__in=["theirs", "mine"]).order_by("pk")) == [theirs, mine]

    # An agent made by imports has no code: a log may name a new version of it.
    client.force_login(people["stranger"])
    assert upload(client, log_zip, task="tiny", agent="their-log").status_code == 201
    assert upload(client, log_zip, task="tiny", agent="their-log@2").status_code == 201
    assert sorted(Agent.objects.filter(name="their-log").values_list("version", flat=True)) == ["1", "2"]


@pytest.mark.django_db(transaction=True)
def test_a_log_of_a_task_version_not_ready_is_refused(tiny_task, log_zip, client, people):
    """Its preparation (prepare.py) would run within the request, and it has no baseline to measure the run by."""
    client.force_login(people["stranger"])
    response = upload(client, log_zip, task="tiny", agent="my-agent")
    assert response.status_code == 400
    assert response.json()["log"] == [
        "task tiny v1 is not validated: logs can be uploaded for a task version once it is ready (validated, its "
        "baseline measured)"
    ]
    assert not Run.objects.exists() and not Agent.objects.filter(name="my-agent").exists()


@pytest.mark.django_db
def test_anonymous_uploads_and_bad_logs_are_refused_and_write_nothing(tiny_task_ready, client, people):
    assert upload(client, b"PK not really").status_code == 403
    client.force_login(people["stranger"])

    response = upload(client, b"not a zip at all", task="tiny")

    assert response.status_code == 400 and "not a zip file" in response.json()["log"][0]
    assert upload(client, b"", task="tiny").status_code == 400  # an empty file
    assert not Run.objects.exists()


@pytest.mark.parametrize(("trick", "message"), ZIP_TRICKS)
@pytest.mark.django_db
def test_a_log_zip_with_an_encrypted_member_or_one_named_dot_is_a_400(
    tiny_task_ready, log_zip, client, people, tmp_path, monkeypatch, trick, message
):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    client.force_login(people["stranger"])

    response = upload(client, trick(log_zip), task="tiny")

    assert response.status_code == 400 and re.search(message, response.json()["log"][0])
    assert not Run.objects.exists()
    assert list(scratch.iterdir()) == []
