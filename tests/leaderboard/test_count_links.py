"""Every count on the leaderboard links to the runs list behind it: following the link lists exactly the runs
that were counted (or, from the infra column, the infrastructure failures), of that agent version and model."""

import html as htmllib
import re

import pytest
from django.urls import reverse

from runner.models import Run
from tests.factories import AgentFactory, RunFactory


@pytest.fixture
def runs(tiny_task):
    """Two counted runs of solver@1 without a model, and around them runs that must not be listed."""
    solver = AgentFactory(name="solver", version="1")
    counted = [
        RunFactory(task_version=tiny_task, agent=solver, succeeded=True, improvement=0.5),
        RunFactory(task_version=tiny_task, agent=solver, status=Run.Status.FAILED, failure_kind="agent"),
    ]
    infra = RunFactory(task_version=tiny_task, agent=solver, status=Run.Status.FAILED, failure_kind="infrastructure")
    others = [
        RunFactory(task_version=tiny_task, agent=solver, status=Run.Status.CANCELLED),
        RunFactory(task_version=tiny_task, agent=solver, forked_from=counted[0], fork_step=0),
        RunFactory(task_version=tiny_task, agent=solver, purpose=Run.Purpose.VALIDATION),
        RunFactory(task_version=tiny_task, agent=solver, model="gpt-x"),  # another row: same agent, a model
        RunFactory(task_version=tiny_task, agent=AgentFactory(name="solver", version="2")),  # another version
    ]
    return {"counted": counted, "infra": infra, "others": others}


def _links(page: str, text: str) -> list[str]:
    """The hrefs of the links whose text is ``text``."""
    return [htmllib.unescape(h) for h in re.findall(rf'<a href="([^"]*)"[^>]*>{re.escape(text)}</a>', page)]


def _listed(client, url: str) -> set[int]:
    page = client.get(url).content.decode()
    return {int(pk) for pk in re.findall(r'href="/runs/(\d+)/"', page)}


def test_the_runs_count_and_the_cell_link_to_exactly_the_runs_counted(client, runs):
    page = client.get(reverse("leaderboard:leaderboard")).content.decode()
    row = next(line for line in page.split("<tr>") if "<strong>solver</strong>@1" in line and "gpt-x" not in line)

    count_link = _links(row, "2")[0]
    assert "agent=solver" in count_link and "version=1" in count_link and "model=&" in count_link
    assert _listed(client, count_link) == {r.pk for r in runs["counted"]}
    by_task = page.split('id="board-by-task"', 1)[1]
    cell_row = next(
        line for line in by_task.split("<tr>") if "<strong>solver</strong>@1" in line and "gpt-x" not in line
    )
    cell_link = next(h for h in _links(cell_row, "50.0% [9.5–90.5] n=2"))
    assert "task=tiny" in cell_link and _listed(client, cell_link) == {r.pk for r in runs["counted"]}
    (infra_link,) = _links(row, "1")
    assert _listed(client, infra_link) == {runs["infra"].pk}


def test_with_infrastructure_failures_included_the_count_links_to_them_too(client, runs):
    page = client.get(reverse("leaderboard:leaderboard") + "?infra=include").content.decode()
    row = next(line for line in page.split("<tr>") if "<strong>solver</strong>@1" in line and "gpt-x" not in line)

    assert _listed(client, _links(row, "3")[0]) == {r.pk for r in runs["counted"]} | {runs["infra"].pk}


def test_the_task_pages_counts_link_to_the_runs_behind_them(client, runs):
    page = client.get(reverse("leaderboard:task_detail", args=["tiny"])).content.decode()
    ranking = page.split("<h2>Leaderboard", 1)[1].split("<h2>Files", 1)[0]
    row = next(line for line in ranking.split("<tr>") if "solver@1</td>" in line and "gpt-x" not in line)

    assert _listed(client, _links(row, "2")[0]) == {r.pk for r in runs["counted"]}


def test_the_runs_list_filters_by_agent_version_and_model(client, runs):
    url = reverse("runner:run_list")
    with_model = {r.pk for r in runs["others"] if r.model == "gpt-x"}

    assert _listed(client, url + "?agent=solver&model=gpt-x") == with_model
    assert _listed(client, url + "?agent=solver&version=2") == {runs["others"][-1].pk}
    assert "unknown ranking" in client.get(url + "?ranking=nonsense").content.decode().lower()
