"""The runs list pages by keyset (?before= / ?after= a run id) on the page and in the API: walking the pages lists
every run exactly once in the list's order (newest first, the id breaking ties between runs that share a time),
whichever way one walks, and a page is read with a bounded number of queries whatever its depth."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import AnonymousUser
from django.urls import reverse
from django.utils import timezone

from runner.models import Agent, Run
from runner.selectors import NoSuchRun, runs_list, runs_page
from runner.views import runs as views
from tests.factories import AgentFactory, RunFactory

ANYONE = AnonymousUser()


@pytest.fixture
def runs(tiny_task):
    """23 runs: 17 that share one timestamp (as a batch queued together does), 6 an hour older; ids out of time
    order, so the order is not the ids'. Returned in the list's order."""
    agent = AgentFactory(name="walker")
    made = RunFactory.create_batch(23, task_version=tiny_task, agent=agent)
    now = timezone.now()
    for i, run in enumerate(made):
        Run.objects.filter(pk=run.pk).update(created_at=now if i % 4 else now - timedelta(hours=1))
    return list(Run.objects.order_by("-created_at", "-pk"))


def _listed(html: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<td>(?:<input [^>]*> )?<a href="/runs/(\d+)/">', html)]


def test_walking_older_pages_lists_every_run_once_in_order(runs):
    seen, before = [], None
    for _ in range(10):
        page = runs_page(runs_list(viewer=ANYONE), viewer=ANYONE, before=before, size=5)
        seen += [r.pk for r in page.runs]
        before = page.older_from
        if before is None:
            break
    assert seen == [r.pk for r in runs]  # none skipped, none repeated, ties in id order


def test_walking_newer_pages_back_from_the_oldest_gives_the_same_pages(runs):
    last = runs_page(runs_list(viewer=ANYONE), viewer=ANYONE, before=runs[-6].pk, size=5)
    assert [r.pk for r in last.runs] == [r.pk for r in runs[-5:]] and last.older_from is None
    pages, after = [], last.runs[0].pk
    while after is not None:
        page = runs_page(runs_list(viewer=ANYONE), viewer=ANYONE, after=after, size=5)
        pages.insert(0, [r.pk for r in page.runs])
        after = page.newer_from
    assert sum(pages, []) == [r.pk for r in runs[:-5]]
    assert pages[0] == [r.pk for r in runs[:3]]  # the newest page holds what is left: 18 = 3 + 5 + 5 + 5


def test_the_page_links_walk_the_list_without_skipping_or_repeating(client, runs, monkeypatch):
    monkeypatch.setattr(views, "RUNS_PAGE_SIZE", 5)
    url, seen = reverse("runner:run_list") + "?agent=walker", []
    for _ in range(10):
        html = client.get(url).content.decode()
        seen += _listed(html)
        older = re.search(r'<a href="(\?[^"]*)" rel="next">older</a>', html)
        if not older:
            break
        url = reverse("runner:run_list") + older[1].replace("&amp;", "&")
        assert "agent=walker" in url  # the filters stay
    assert seen == [r.pk for r in runs]


def test_a_page_from_a_run_the_viewer_cannot_see_is_the_first_page_with_a_message(client, runs):
    hidden = RunFactory(task_version=runs[0].task_version, agent=AgentFactory(visibility=Agent.Visibility.PRIVATE))

    with pytest.raises(NoSuchRun):
        runs_page(runs_list(viewer=ANYONE), viewer=ANYONE, before=hidden.pk)
    html = client.get(reverse("runner:run_list") + f"?before={hidden.pk}").content.decode()
    assert f"No run {hidden.pk} to list from" in html and _listed(html)[0] == runs[0].pk


def test_the_api_pages_by_before_and_its_next_link_goes_on(client, runs):
    url, seen = reverse("run-list") + "?limit=4&before=" + str(runs[1].pk), []
    while url:
        answer = client.get(url).json()
        assert answer["count"] is None  # a keyset page counts nothing
        seen += [r["id"] for r in answer["results"]]
        url = answer["next"]
    assert seen == [r.pk for r in runs[2:]]


def test_the_api_skips_an_offset_after_before_and_refuses_an_unknown_run(client, runs):
    plain = client.get(reverse("run-list") + f"?before={runs[0].pk}&limit=5").json()
    both = client.get(reverse("run-list") + f"?before={runs[0].pk}&offset=3&limit=2").json()
    unknown = client.get(reverse("run-list") + "?before=999999999")

    assert [r["id"] for r in both["results"]] == [r["id"] for r in plain["results"]][3:5]
    assert f"before={both['results'][-1]['id']}" in both["next"]  # the next page goes on from its last item
    following = client.get(both["next"]).json()  # the offset was skipped once: the next page skips nothing
    assert [r["id"] for r in following["results"]] == [runs[6].pk, runs[7].pk]
    assert unknown.status_code == 404 and "no run 999999999" in unknown.json()["detail"]


def test_the_api_still_pages_by_offset(client, runs):
    answer = client.get(reverse("run-list") + "?limit=5&offset=5").json()

    assert answer["count"] == 23 and [r["id"] for r in answer["results"]] == [r.pk for r in runs[5:10]]


@pytest.mark.parametrize("extra", [0, 40])
def test_a_runs_page_takes_a_bounded_number_of_queries_at_any_depth(
    client, runs, django_assert_max_num_queries, extra, monkeypatch
):
    monkeypatch.setattr(views, "RUNS_PAGE_SIZE", 5)
    RunFactory.create_batch(extra, task_version=runs[0].task_version, status=Run.Status.QUEUED)
    for url in ("", f"?before={runs[10].pk}", f"?after={runs[10].pk}", "?status=queued"):
        with django_assert_max_num_queries(4):  # the session, the anchor run, the page (+1 row to know of more)
            assert client.get(reverse("runner:run_list") + url).status_code == 200
