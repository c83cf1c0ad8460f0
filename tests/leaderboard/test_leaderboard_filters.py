"""The leaderboard's filters: ?category= counts only the runs on that category's tasks, on the page, in its CSV and
JSON exports and in the API; a count's link lists the runs of that category only; a category that does not exist is
named (the page shows every category, the API answers 400)."""

import csv
import html as htmllib
import io
import re

import pytest
from django.urls import reverse

from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, RunFactory, package_write

URL = reverse("leaderboard:leaderboard")
API = reverse("api-leaderboard")


@pytest.fixture
def kaggle_task(tmp_path, db):
    files = dict(TINY_FILES, **{"task.toml": TINY_FILES["task.toml"].replace('"canonical"', '"classic_kaggle"')})
    version, _ = task_import(root=package_write(tmp_path / "kaggle", files), slug="kaggle")
    return version


@pytest.fixture
def runs(tiny_task, kaggle_task):
    """solver: 1 of 1 on the canonical task, 0 of 2 on the Kaggle one; kaggler ran the Kaggle task only."""
    solver = AgentFactory(name="solver")
    canonical = [RunFactory(task_version=tiny_task, agent=solver, succeeded=True, improvement=0.5)]
    kaggle = [RunFactory(task_version=kaggle_task, agent=solver, succeeded=False, improvement=0.0) for _ in range(2)]
    RunFactory(task_version=kaggle_task, agent=AgentFactory(name="kaggler"), succeeded=True, improvement=0.3)
    return {"canonical": canonical, "kaggle": kaggle}


def _rows(html: str) -> dict[str, str]:
    table = html.split('id="board-table"', 1)[1].split("</table>", 1)[0]
    return {m[1]: m[0] for m in re.finditer(r"<td><strong>([^<]+)</strong>@.*?</tr>", table, re.S)}


def test_a_category_counts_only_the_runs_on_its_tasks(client, runs):
    every = _rows(client.get(URL).content.decode())
    canonical = _rows(client.get(URL + "?category=canonical").content.decode())

    assert set(every) == {"solver", "kaggler"} and "33.3% [6.1–79.2] n=3" in every["solver"]
    assert set(canonical) == {"solver"} and "100.0% [20.7–100.0] n=1" in canonical["solver"]


def test_the_category_is_chosen_in_the_filter_form(client, runs):
    html = client.get(URL + "?category=classic_kaggle").content.decode()
    form = html.split('id="board-filters"', 1)[1].split("</form>", 1)[0]

    assert '<option value="classic_kaggle" selected>Classic Kaggle</option>' in form
    assert 'class="task-col"' in html and "kaggle" in html and ">tiny</a>" not in html  # only its tasks' columns


def test_a_category_with_no_runs_says_so(client, runs):
    html = client.get(URL + "?category=research").content.decode()

    assert "No benchmark runs have ended yet on the tasks of this category." in html
    assert client.get(URL + "?category=research&format=csv").content.decode().count("\n") == 1


def test_the_exports_and_the_api_follow_the_category(client, runs):
    lines = list(csv.DictReader(io.StringIO(client.get(URL + "?format=csv&category=classic_kaggle").content.decode())))
    data = client.get(URL + "?format=json&category=classic_kaggle").json()
    api = client.get(API + "?category=classic_kaggle").json()

    assert {(r["agent"], r["runs"]) for r in lines} == {("solver", "2"), ("kaggler", "1")}
    assert data["category"] == "classic_kaggle" and {c["task"] for c in data["cells"]} == {"kaggle"}
    assert {(r["agent"], r["runs"]) for r in api} == {("solver", 2), ("kaggler", 1)}


def test_a_counts_link_lists_the_runs_of_the_category_only(client, runs):
    html = client.get(URL + "?category=classic_kaggle").content.decode()
    row = _rows(html)["solver"]
    link = htmllib.unescape(re.search(r'<td class="num"><a href="([^"]*)">2</a>', row)[1])

    listed = client.get(link).content.decode()
    shown = {int(pk) for pk in re.findall(r'href="/runs/(\d+)/"', listed)}
    assert "category=classic_kaggle" in link
    assert shown == {r.pk for r in runs["kaggle"]}


def test_an_unknown_category_is_named_and_every_category_shown(client, runs):
    html = client.get(URL + "?category=kaggle-ish").content.decode()

    assert "Unknown category" in html and "classic_kaggle" in html
    assert set(_rows(html)) == {"solver", "kaggler"}


def test_the_api_answers_an_unknown_category_with_a_400_naming_the_choices(client, runs):
    response = client.get(API + "?category=kaggle-ish")

    assert response.status_code == 400
    assert "expected one of canonical, classic_kaggle" in response.json()["category"][0]
