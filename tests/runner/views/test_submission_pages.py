"""The site's side of submissions: one "New runs" form (staff's queue runs at once, a submitter's waits for
approval), the agent page's "Request runs" form and submissions, staff's page of pending submissions with Approve
and Reject, the header's link to it, and the browsable API's form for new runs."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from core.shared_cache import counts_clear
from runner.agents.submissions import submission_create
from runner.models import Batch, Run, RunSpec, Submission
from tests.factories import AgentFactory


@pytest.fixture(autouse=True)
def fresh_throttle(db):
    counts_clear()  # request throttling counts in the shared cache


@pytest.fixture
def mine(people):
    return AgentFactory(name="owned", owner=people["owner"])


def request_runs(client, agent, task, **extra):
    return client.post(reverse("runner:run_request"), {"agent": agent.pk, "tasks": [task.pk], "repeats": 2, **extra})


@pytest.mark.django_db
def test_the_agent_page_offers_its_owner_and_staff_the_request_form(client, people, mine, tiny_task):
    page = reverse("runner:agent_detail", args=["owned"])
    for who, offered in (("owner", True), ("staff", True), ("stranger", False)):
        client.force_login(people[who])
        html = client.get(page).content.decode()
        assert ('class="run-request' in html) is offered, who
        assert ("<h2>Submissions</h2>" in html) is offered, who
    client.logout()
    assert 'class="run-request' not in client.get(page).content.decode()


@pytest.mark.django_db
def test_a_submitters_form_makes_a_submission_shown_on_the_agent_page(
    client, people, mine, tiny_task, django_capture_on_commit_callbacks
):
    client.force_login(people["owner"])
    with django_capture_on_commit_callbacks() as jobs:
        answer = request_runs(client, mine, tiny_task.task, max_steps=5)

    assert answer.status_code == 302 and answer.url == reverse("runner:agent_detail", args=["owned"])
    batch = Batch.objects.get()
    assert (batch.submission.approval, batch.created_by, batch.max_steps, batch.repeats) == (
        "pending",
        people["owner"],
        5,
        2,
    )
    assert not Run.objects.exists() and jobs == []
    html = client.get(answer.url).content.decode()
    assert f"submission {batch.pk} sent: it waits for staff to approve it" in html
    row = html[html.index(f'data-submission="{batch.pk}"') :]
    assert "Smoke-tested, waiting for approval" in row and "5 steps" in row


@pytest.mark.django_db
def test_staffs_form_queues_the_runs_at_once(client, people, mine, tiny_task, django_capture_on_commit_callbacks):
    client.force_login(people["staff"])
    with django_capture_on_commit_callbacks() as jobs:
        answer = request_runs(client, mine, tiny_task.task)
    assert answer.status_code == 302 and answer.url == f"{reverse('runner:run_list')}?agent=owned"
    assert Run.objects.filter(agent=mine, status="queued", origin="executed").count() == 2 and len(jobs) == 1
    assert Submission.objects.get().decided_by == people["staff"]


@pytest.mark.django_db
def test_the_form_offers_a_submitter_only_their_agents_and_enabled_models(client, people, mine, tiny_task):
    theirs = AgentFactory(name="theirs", owner=people["stranger"])
    client.force_login(people["owner"])
    html = client.get(reverse("runner:run_request")).content.decode()
    assert "owned@1" in html and "theirs@1" not in html

    answer = request_runs(client, theirs, tiny_task.task)
    assert answer.status_code == 400 and "Select a valid choice" in answer.content.decode()
    answer = request_runs(client, mine, tiny_task.task, model="https://my.own.server/v1")
    assert answer.status_code == 400 and "Select a valid choice" in answer.content.decode()
    assert not Batch.objects.exists()


@pytest.mark.django_db
def test_a_refused_request_says_why_on_the_form(client, people, mine, tiny_task, settings):
    settings.BENCH_MAX_RUNS_PER_REQUEST = 1
    client.force_login(people["owner"])
    answer = request_runs(client, mine, tiny_task.task)
    assert answer.status_code == 400 and "at most 1 runs per request" in answer.content.decode()
    assert not Batch.objects.exists()


@pytest.mark.django_db
def test_visitors_are_sent_to_sign_in(client):
    answer = client.get(reverse("runner:run_request"))
    assert answer.status_code == 302 and answer.url.startswith(reverse("accounts:login"))


@pytest.mark.django_db
def test_staff_see_pending_submissions_and_approve_or_reject_them(client, people, mine, tiny_task):
    first, _ = submission_create(submitter=people["owner"], spec=RunSpec(mine), tasks=[tiny_task.task], repeats=2)
    second, _ = submission_create(submitter=people["owner"], spec=RunSpec(mine), tasks=[tiny_task.task])
    client.force_login(people["staff"])

    html = client.get(reverse("leaderboard:home")).content.decode()
    assert "Submissions to approve (2)" in html
    html = client.get(reverse("runner:submission_list")).content.decode()
    assert html.count('name="approve"') == 2 and html.count('name="reject"') == 2

    approved = client.post(reverse("runner:submission_approve", args=[first.pk]))
    assert approved.status_code == 302 and Run.objects.filter(batch=first.batch).count() == 2
    client.post(reverse("runner:submission_reject", args=[second.pk]), {"reason": "not now"})
    second.refresh_from_db()
    assert (second.approval, second.rejection_reason, second.batch.runs.count()) == ("rejected", "not now", 0)
    html = client.get(reverse("runner:submission_list")).content.decode()
    assert "Submissions to approve" not in html and 'name="approve"' not in html and "not now" in html


@pytest.mark.django_db
def test_a_submitter_sees_their_own_submissions_without_buttons(client, people, mine, tiny_task):
    submission_create(submitter=people["owner"], spec=RunSpec(mine), tasks=[tiny_task.task])
    client.force_login(people["owner"])
    html = client.get(reverse("runner:submission_list")).content.decode()
    assert "owned" in html and 'name="approve"' not in html and "Submissions to approve" not in html
    client.force_login(people["stranger"])
    assert 'class="submission"' not in client.get(reverse("runner:submission_list")).content.decode()


@pytest.mark.django_db
def test_the_browsable_api_form_for_new_runs_shows_the_request_not_a_runs_fields(client, people):
    client.force_login(people["staff"])
    html = client.get("/api/v1/runs/", HTTP_ACCEPT="text/html").content.decode()
    form = html[html.index('id="post-object-form"') :]
    assert 'name="agent"' in form and 'name="repeats"' in form and "Tasks" in form
    assert 'name="peak_memory_mb"' not in form and 'name="final_score"' not in form


@pytest.mark.django_db
def test_the_submissions_page_and_api_read_a_fixed_number_of_queries(client, people, mine, tiny_task):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries() -> tuple[int, int]:
        counts = []
        for url in (reverse("runner:submission_list"), "/api/v1/submissions/"):
            with CaptureQueriesContext(connection) as captured:
                assert client.get(url).status_code == 200
            counts.append(len(captured))
        return tuple(counts)

    def add(count: int) -> None:  # each: one waiting, one approved (with runs), of another agent
        for _ in range(count):
            other = AgentFactory(owner=people["stranger"])
            submission_create(submitter=people["stranger"], spec=RunSpec(other), tasks=[tiny_task.task])
            submission, _ = submission_create(
                submitter=people["stranger"], spec=RunSpec(other), tasks=[tiny_task.task], repeats=2
            )
            client.post(reverse("runner:submission_approve", args=[submission.pk]))

    client.force_login(people["staff"])
    add(1)
    one = queries()
    add(5)
    assert queries() == one


@pytest.mark.django_db
def test_a_submissions_runs_link_lists_its_runs_alone_on_the_page_and_in_the_api(client, people, mine, tiny_task):
    first, _ = submission_create(submitter=people["staff"], spec=RunSpec(mine), tasks=[tiny_task.task], repeats=2)
    submission_create(
        submitter=people["staff"], spec=RunSpec(mine), tasks=[tiny_task.task]
    )  # the same agent's other runs
    assert Run.objects.filter(agent=mine).count() == 3
    client.force_login(people["owner"])

    link = f"{reverse('runner:run_list')}?batch={first.pk}"
    assert link in client.get(reverse("runner:submission_list")).content.decode()
    html = client.get(link).content.decode()
    api = client.get(f"/api/v1/runs/?batch={first.pk}").json()["results"]

    listed = {int(href.split("/")[2]) for href in re.findall(r'href="(/runs/\d+/)"', html)}
    assert listed == set(first.batch.runs.values_list("pk", flat=True))
    assert f"only the runs of submission {first.pk}" in html
    assert {run["id"] for run in api} == listed
    assert client.get("/api/v1/runs/?batch=first").status_code == 400
