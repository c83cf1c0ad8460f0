"""The comparison page pairs two leaderboard rows on the tasks both ran, from the runs the leaderboard counts."""

import pytest
from django.urls import reverse

from runner.models import Run
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, RunFactory, package_write

URL = reverse("leaderboard:compare")


@pytest.fixture
def two_rows(tiny_task, tmp_path):
    """A (solver@1 with model m) ran tiny 2/2 and other 1/1; B (plain@1) ran tiny 0/2; other infra failure of B."""
    other, _ = task_import(root=package_write(tmp_path / "other", TINY_FILES), slug="other")
    solver, plain = AgentFactory(name="solver"), AgentFactory(name="plain")
    for _ in range(2):
        RunFactory(task_version=tiny_task, agent=solver, model="m", succeeded=True)
        RunFactory(task_version=tiny_task, agent=plain, succeeded=False)
    RunFactory(task_version=other, agent=solver, model="m", succeeded=True)
    RunFactory(task_version=tiny_task, agent=plain, status=Run.Status.FAILED, failure_kind="infrastructure")
    RunFactory(task_version=tiny_task, agent=plain, status=Run.Status.CANCELLED, succeeded=True)
    RunFactory(task_version=tiny_task, agent=solver, model="", succeeded=False)  # another row: no model


def test_the_comparison_pairs_the_rows_on_the_tasks_both_ran(client, two_rows):
    html = client.get(URL + "?a=solver@1/m&b=plain@1").content.decode()

    # tiny: 2/2 against 0/2 (the infrastructure failure and the cancelled run are not counted); "other" is A's alone
    # two runs a side say A is better, not that it surely always is: the interval is wide, not [+100, +100]
    assert "A − B: +100.0 points</strong>\n[+6.2, +98.7] over 1 task both ran" in html
    assert "100.0% [34.2–100.0] n=2" in html and "0.0% [0.0–65.8] n=2" in html
    assert "only A ran other" in html


def test_the_leaderboard_links_to_the_comparison(client, two_rows):
    html = client.get(reverse("leaderboard:leaderboard")).content.decode()
    assert URL in html
    page = client.get(URL).content.decode()
    assert '<option value="solver@1/m">' in page and '<option value="plain@1">' in page


def test_a_row_that_is_not_on_the_leaderboard_is_refused_by_name(client, two_rows):
    response = client.get(URL + "?a=solver@2&b=plain@1")  # there is no solver@2

    assert response.status_code == 400
    assert "No leaderboard row &#x27;solver@2&#x27;" in response.content.decode()
    assert client.get(URL + "?a=plain@1&b=plain@1").status_code == 400


def test_a_private_row_cannot_be_compared_by_whoever_may_not_see_it(viewer, private_run, public_run):
    response = viewer.client.get(URL + "?a=hidden-hand@1&b=open-book@1")

    assert response.status_code == (200 if viewer.may_see else 400)


def test_the_same_agent_with_two_models_is_two_rows(client, two_rows):
    html = client.get(URL + "?a=solver@1/m&b=solver@1").content.decode()

    assert "A − B: +100.0 points</strong>" in html  # tiny: 2 of 2 with model m, 0 of 1 without a model
    assert "0.0% [0.0–79.3] n=1" in html
