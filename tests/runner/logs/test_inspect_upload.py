"""An Inspect AI eval log uploaded by a signed-in user, on the site (/runs/import/) or through the API
(POST /api/v1/logs/inspect/): a self-reported run per sample under an agent of their own, not scored here; a file
that is no Inspect log, or a log that cannot be read, is refused with the reason and nothing is kept."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from core.shared_cache import counts_clear
from runner.models import Agent, Run
from tests.factories import AgentFactory
from tests.runner.logs.test_inspect_import import their_sample, write_their_log

API = "/api/v1/logs/inspect/"
PAGE = "/runs/import/"


@pytest.fixture(autouse=True)
def fresh_throttle(db):
    counts_clear()  # the upload throttle counts in the shared cache
    yield
    counts_clear()


@pytest.fixture
def their_log(tiny_task_ready, tmp_path) -> bytes:
    problem = tiny_task_ready.research_problem
    return write_their_log(tmp_path / "theirs.json", [their_sample(1, problem), their_sample(2, problem)]).read_bytes()


def upload(client, url: str, data: bytes, name: str = "theirs.json", **fields):
    return client.post(url, {"log": SimpleUploadedFile(name, data, "application/json"), **fields})


@pytest.mark.django_db(transaction=True)
def test_a_log_uploaded_through_the_api_is_a_self_reported_run_per_sample_of_their_agent(their_log, client, people):
    client.force_login(people["stranger"])

    response = upload(client, API, their_log, task="tiny", agent="their-agent")

    assert response.status_code == 201, response.content
    runs = response.json()
    assert [(r["origin"], r["agent"], r["steps_count"], r["final_score"]) for r in runs] == [
        ("imported", "their-agent", 2, None),
        ("imported", "their-agent", 2, None),
    ]
    assert Agent.objects.get(name="their-agent").owner == people["stranger"]
    assert {run.origin for run in Run.objects.all()} == {Run.Origin.SELF_REPORTED}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("name", "data", "said"),
    [
        ("run.zip", b"PK\x03\x04", "run.zip is not an Inspect log: its name ends in .json or .eval"),
        ("theirs.json", b"{not json", "theirs.json"),
        ("theirs.eval", b"PK\x03\x04", "theirs.eval is not a readable zip"),
        ("é" * 250 + ".json", b"{not json", "upload.json does not parse as JSON"),  # a name too long to keep
    ],
)
def test_what_is_no_inspect_log_is_refused_through_the_api_and_nothing_is_kept(
    client, people, tiny_task, name, data, said
):
    client.force_login(people["stranger"])

    response = upload(client, API, data, name, task="tiny")

    assert response.status_code == 400 and said in response.json()["log"][0]
    assert not Run.objects.exists() and not Agent.objects.filter(owner=people["stranger"]).exists()


@pytest.mark.django_db(transaction=True)
def test_nobody_files_inspect_runs_under_an_agent_not_theirs_nor_uploads_signed_out(their_log, client, people):
    AgentFactory(name="research", owner=None)
    assert upload(client, API, their_log, task="tiny").status_code in (401, 403)
    client.force_login(people["stranger"])

    response = upload(client, API, their_log, task="tiny", agent="research")

    assert response.status_code == 400 and "is not yours" in response.json()["log"][0]
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_log_uploaded_on_the_site_opens_its_first_run_and_says_what_came_in(their_log, client, people):
    client.force_login(people["stranger"])

    response = upload(client, PAGE, their_log, task="tiny", agent="their-agent")

    first, second = Run.objects.order_by("pk")
    assert response.status_code == 302 and response["Location"] == f"/runs/{first.pk}/"
    page = client.get(response["Location"]).content.decode()
    assert f"2 runs imported from the Inspect log: {first.pk} (2 steps), {second.pk} (2 steps)" in page
    assert "not scored" in page


@pytest.mark.django_db(transaction=True)
def test_an_inspect_log_in_its_zip_format_is_imported_on_the_site(client, people, tiny_task_ready, tmp_path):
    from tests.runner.logs.test_inspect_import import their_sample, write_their_log

    log = write_their_log(tmp_path / "theirs.eval", [their_sample(1, tiny_task_ready.research_problem)])
    client.force_login(people["stranger"])

    response = upload(client, PAGE, log.read_bytes(), "theirs.eval", task="tiny", agent="their-agent")

    (run,) = Run.objects.all()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert run.steps_count == 2 and run.model == "openai/gpt-4o"
    broken = upload(client, PAGE, b"PK\x03\x04", "broken.eval", task="tiny")
    assert broken.status_code == 400 and b"broken.eval is not a readable zip" in broken.content
