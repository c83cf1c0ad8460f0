"""The home page and the task list count the runs the leaderboard counts (trials of the current version that ended
finished, failed by the agent or at a limit), not every run: a fork, a cancelled run, a validation run, an
infrastructure failure, a live run or a run of an older version is not one more run, nor its score the best."""

import re

import pytest
from django.urls import reverse

from runner.models import Run
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, RunFactory, package_write


@pytest.fixture
def runs(tiny_task, tmp_path):
    """On tiny's current version (v2): 2 counted runs (one succeeded, score 3), and around them runs that must not
    count, each with a score (9) that would be the best if it did; one live run."""
    old = tiny_task
    changed = dict(TINY_FILES, **{"env/train.py": 'open("value.txt", "w").write("3.0")\n'})
    current, _ = task_import(root=package_write(tmp_path / "tiny-v2", changed), slug="tiny")
    agent = AgentFactory(name="solver")
    counted = [
        RunFactory(task_version=current, agent=agent, succeeded=True, final_score=3.0),
        RunFactory(task_version=current, agent=agent, status=Run.Status.FAILED, failure_kind="agent", succeeded=False),
    ]
    for fields in [
        {"forked_from": counted[0], "fork_step": 0},
        {"status": Run.Status.CANCELLED},
        {"purpose": Run.Purpose.VALIDATION},
        {"status": Run.Status.FAILED, "failure_kind": "infrastructure"},
    ]:
        RunFactory(task_version=current, agent=agent, succeeded=True, final_score=9.0, **fields)
    RunFactory(task_version=old, agent=agent, succeeded=True, final_score=9.0)  # an older version
    RunFactory(task_version=current, agent=agent, status=Run.Status.RUNNING)
    RunFactory.create_batch(2, task_version=current, agent=agent, status=Run.Status.QUEUED)
    return counted


def test_the_home_page_counts_what_the_leaderboard_counts(client, runs):
    version = runs[0].task_version
    RunFactory(task_version=version, purpose=Run.Purpose.VALIDATION, status=Run.Status.QUEUED)  # as /runs/ lists
    html = client.get(reverse("leaderboard:home")).content.decode()

    assert "<strong>2</strong> runs counted" in html
    assert "<strong>1</strong> succeeded" in html
    assert "<strong>1</strong> running" in html  # the running trial: it counts once it ends
    assert "<strong>3</strong> queued" in html  # not running yet, a validation run among them: said apart


def test_the_home_pages_count_links_to_the_runs_it_counts(client, runs):
    html = client.get(reverse("leaderboard:home")).content.decode()
    link = re.search(r'<a href="([^"]*)"[^>]*><strong>2</strong> runs counted', html)[1].replace("&amp;", "&")

    listed = {int(pk) for pk in re.findall(r'href="/runs/(\d+)/"', client.get(link).content.decode())}
    assert listed == {r.pk for r in runs}


def test_the_task_list_counts_and_takes_the_best_score_of_the_counted_runs_only(client, runs):
    html = client.get(reverse("leaderboard:task_list")).content.decode()
    row = html.split('<span class="muted">tiny</span>', 1)[1].split("</tr>", 1)[0]

    assert '<td class="num">2</td>' in row
    assert '<td class="num">3.0000</td>' in row and "9.0000" not in row


def test_with_no_runs_the_counts_are_zero(client, tiny_task):
    home = client.get(reverse("leaderboard:home")).content.decode()
    tasks = client.get(reverse("leaderboard:task_list")).content.decode()

    assert "<strong>0</strong> runs counted" in home and "<strong>0</strong> succeeded" in home
    row = tasks.split('<span class="muted">tiny</span>', 1)[1].split("</tr>", 1)[0]
    assert '<td class="num">0</td>' in row
