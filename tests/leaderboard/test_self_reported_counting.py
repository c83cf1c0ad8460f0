"""Self-reported runs count with ?origin=all only once scored here: an import whose log brought no workspace (an
Inspect log's) is shown but never counted, and its page says so rather than that it was scored."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.urls import reverse

from leaderboard.query import RankingOptions
from leaderboard.selectors import leaderboard_rows
from runner.models import Run
from tests.factories import AgentFactory, RunFactory

ALL = RankingOptions(include_self_reported=True)


@pytest.mark.django_db
def test_an_unscored_import_is_not_counted_and_its_page_says_why(client, tiny_task_ready):
    agent = AgentFactory(name="elsewhere")
    unscored = RunFactory(task_version=tiny_task_ready, agent=agent, origin=Run.Origin.SELF_REPORTED, succeeded=None)
    rows = leaderboard_rows(viewer=AnonymousUser(), options=ALL)
    assert [row for row in rows if row["agent__name"] == "elsewhere"] == []
    page = client.get(reverse("runner:run_detail", args=[unscored.pk])).content.decode()
    assert "was scored here" not in page and "it has no score from here" in page

    RunFactory(task_version=tiny_task_ready, agent=agent, origin=Run.Origin.SELF_REPORTED, final_score=3.0,
               succeeded=True)  # fmt: skip
    (row,) = [row for row in leaderboard_rows(viewer=AnonymousUser(), options=ALL) if row["agent__name"] == "elsewhere"]
    assert row["runs"] == 1


@pytest.mark.django_db
def test_with_self_reported_runs_counted_their_rows_are_marked(client, tiny_task_ready):
    theirs = AgentFactory(name="elsewhere", kind="external")
    RunFactory(task_version=tiny_task_ready, agent=theirs, origin=Run.Origin.SELF_REPORTED, final_score=3.0)
    RunFactory(task_version=tiny_task_ready, agent=AgentFactory(name="ours"), final_score=2.0)
    page = client.get(reverse("leaderboard:leaderboard") + "?origin=all").content.decode()
    row = page.split("<strong>elsewhere</strong>", 1)[1].split("</td>", 1)[0]
    assert '<span class="badge self-reported"' in row
    ours = page.split("<strong>ours</strong>", 1)[1].split("</td>", 1)[0]
    assert "self-reported" not in ours


@pytest.mark.django_db
def test_a_row_links_to_compare_it_and_for_the_signed_in_to_reproduce_it(client, tiny_task_ready, django_user_model):
    RunFactory(task_version=tiny_task_ready, agent=AgentFactory(name="ours"), final_score=2.0, model="m")
    page = client.get(reverse("leaderboard:leaderboard")).content.decode()
    assert 'href="/leaderboard/compare/?a=ours%401/m"' in page and "?row=" not in page
    client.force_login(django_user_model.objects.create_user("someone", password="x"))
    page = client.get(reverse("leaderboard:leaderboard")).content.decode()
    assert 'href="/leaderboard/reproductions/?row=ours%401/m"' in page
    chosen = client.get("/leaderboard/reproductions/?row=ours@1/m").content.decode()
    assert '<option value="ours@1/m" selected>' in chosen
