"""Submissions: a submitter asks for runs of their own agent (tasks x repeats, a model among the platform's enabled
endpoints, limits); staff approve (the runs are queued, executed like any run: verified) or reject (no runs);
BENCH_AUTO_APPROVE_SUBMISSIONS approves at once; requests are throttled per user. API and site."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from core.shared_cache import counts_clear
from runner.agents.submissions import submissions_after_smoke
from runner.models import Agent, Batch, ModelEndpoint, Run, RunSpec, Submission
from runner.services import batch_create
from runner.throttles import RunRequestThrottle
from tests.factories import AgentFactory

API = "/api/v1/submissions/"


@pytest.fixture(autouse=True)
def fresh_throttle(db):
    counts_clear()  # request throttling counts in the shared cache


@pytest.fixture
def model(db) -> ModelEndpoint:
    ModelEndpoint.objects.create(name="off-model", base_url="http://127.0.0.1:9/v1", model_id="x", is_enabled=False)
    return ModelEndpoint.objects.create(name="house-model", base_url="http://127.0.0.1:9/v1", model_id="x")


@pytest.fixture
def mine(people):
    """An uploaded agent of "owner" that passed its smoke test."""
    return AgentFactory(name="owned", owner=people["owner"], smoke_state="passed", smoke_tested_at=timezone.now())


def ask(client, **fields):
    body = {"agent": "owned", "tasks": ["tiny"], "repeats": 2, **fields}
    return client.post(API, body, content_type="application/json")


def everything() -> tuple:
    return (
        sorted(Submission.objects.values_list("pk", "approval", "decided_by_id", "rejection_reason")),
        sorted(Run.objects.values_list("pk", "batch_id", "status")),
    )


@pytest.mark.django_db
def test_a_submitter_asks_for_runs_of_their_agent_and_it_waits_for_approval(
    client, people, mine, tiny_task, model, django_capture_on_commit_callbacks
):
    client.force_login(people["owner"])
    with django_capture_on_commit_callbacks() as jobs:
        answer = ask(client, model="house-model", max_steps=4, max_cost="0.5")

    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert (body["approval"], body["state"], body["runs"]) == ("pending", "smoke_tested", 0)
    assert (body["agent"], body["submitter"], body["tasks"], body["repeats"]) == ("owned", "owner", ["tiny"], 2)
    assert (body["model"], body["max_steps"], body["max_cost"]) == ("house-model", 4, "0.500000")
    assert not Run.objects.exists() and jobs == []
    assert client.get(f"{API}{body['id']}/").json()["state"] == "smoke_tested"


@pytest.mark.django_db
def test_a_request_for_an_agent_waiting_for_its_smoke_test_waits_for_it_and_cannot_be_approved_before(
    client, people, tiny_task
):
    agent = AgentFactory(name="owned", owner=people["owner"], smoke_state="pending")
    client.force_login(people["owner"])
    body = ask(client).json()
    assert body["state"] == "uploaded"
    client.force_login(people["staff"])
    refused = client.post(f"{API}{body['id']}/approve/")
    assert refused.status_code == 400, refused.content
    assert refused.json()["detail"] == "agent owned@1 waits for its smoke test; runs of it can be queued once it passes"
    assert Submission.objects.get().approval == "pending" and not Run.objects.exists()
    assert ask(client).json()["approval"] == "pending"  # staff's own request waits for the test too

    Agent.objects.filter(pk=agent.pk).update(smoke_state="passed")
    submissions_after_smoke(agent=Agent.objects.get(pk=agent.pk))
    # Staff's own request is approved as it would have been at once; the submitter's waits for staff.
    assert sorted(Submission.objects.values_list("batch__created_by__username", "approval")) == [
        ("curator", "approved"), ("owner", "pending"),
    ]  # fmt: skip
    assert Run.objects.filter(batch__created_by=people["staff"], status="queued").count() == 2


@pytest.mark.django_db
def test_a_failed_smoke_test_rejects_the_requests_that_waited_for_it_and_refuses_new_ones(
    client, people, tiny_task, settings
):
    settings.BENCH_AUTO_APPROVE_SUBMISSIONS = True
    agent = AgentFactory(name="owned", owner=people["owner"], smoke_state="pending")
    client.force_login(people["owner"])
    pk = ask(client).json()["id"]
    assert Submission.objects.get(pk=pk).approval == "pending"  # auto-approval waits for the smoke test

    Agent.objects.filter(pk=agent.pk).update(smoke_state="failed", smoke_error="the agent exited (code 3)")
    submissions_after_smoke(agent=Agent.objects.get(pk=agent.pk))
    answer = client.get(f"{API}{pk}/").json()
    assert (answer["approval"], answer["state"], answer["runs"]) == ("rejected", "rejected", 0)
    assert answer["rejection_reason"] == (
        "agent owned@1 failed its smoke test (the agent exited (code 3)); upload a version that passes it"
    )
    again = ask(client)
    assert again.status_code == 400 and "agent owned@1 failed its smoke test" in again.content.decode()


@pytest.mark.django_db
def test_staff_approve_and_the_runs_are_queued_verified_in_the_submission(
    client, people, mine, tiny_task, django_capture_on_commit_callbacks
):
    client.force_login(people["owner"])
    pk = ask(client, max_steps=4).json()["id"]

    client.force_login(people["staff"])
    with django_capture_on_commit_callbacks() as jobs:
        answer = client.post(f"{API}{pk}/approve/")

    assert answer.status_code == 200, answer.content
    runs = list(Run.objects.filter(batch_id=pk))
    assert len(runs) == 2 and len(jobs) == 1  # one commit sends both
    assert {(r.agent_id, r.task.slug, r.status, r.origin, r.max_steps) for r in runs} == {
        (mine.pk, "tiny", "queued", "executed", 4)
    }
    assert sorted(r["id"] for r in answer.json()["created_runs"]) == sorted(r.pk for r in runs)
    submission = Submission.objects.get(pk=pk)
    assert (submission.approval, submission.decided_by, submission.state) == ("approved", people["staff"], "approved")

    again = client.post(f"{API}{pk}/approve/")
    assert again.status_code == 409 and Run.objects.count() == 2


@pytest.mark.django_db
def test_the_state_follows_the_runs(client, people, mine, tiny_task):
    client.force_login(people["staff"])
    pk = client.post(API, {"agent": "owned", "tasks": ["tiny"], "repeats": 2}, content_type="application/json").json()
    pk = pk["id"]
    runs = list(Run.objects.filter(batch_id=pk).order_by("pk"))

    def state() -> str:
        return client.get(f"{API}{pk}/").json()["state"]

    assert state() == "approved"  # staff's own request is approved at once
    Run.objects.filter(pk=runs[0].pk).update(status="running")
    assert state() == "running"
    Run.objects.filter(pk=runs[0].pk).update(status="finished")
    assert state() == "running"  # one ended, one still queued
    Run.objects.filter(pk=runs[1].pk).update(status="failed")
    assert state() == "done"


@pytest.mark.django_db
def test_only_staff_approve_or_reject(client, people, mine, tiny_task, django_capture_on_commit_callbacks):
    client.force_login(people["owner"])
    pk = ask(client).json()["id"]
    before = everything()

    for who in ("owner", "stranger"):
        client.force_login(people[who])
        with django_capture_on_commit_callbacks() as jobs:
            approve = client.post(f"{API}{pk}/approve/")
            reject = client.post(f"{API}{pk}/reject/", {"reason": "no"}, content_type="application/json")
        assert (approve.status_code, reject.status_code) == (403, 403), who
        assert jobs == [] and everything() == before
    client.logout()
    assert client.post(f"{API}{pk}/approve/").status_code == 403 and everything() == before


@pytest.mark.django_db
def test_a_rejected_submission_says_why_and_never_gets_runs(client, people, mine, tiny_task):
    client.force_login(people["owner"])
    pk = ask(client).json()["id"]
    client.force_login(people["staff"])

    assert client.post(f"{API}{pk}/reject/", {"reason": "  "}, content_type="application/json").status_code == 400
    assert Submission.objects.get(pk=pk).approval == "pending"
    answer = client.post(f"{API}{pk}/reject/", {"reason": "uses too much"}, content_type="application/json")
    assert answer.status_code == 200
    assert (answer.json()["state"], answer.json()["rejection_reason"]) == ("rejected", "uses too much")

    assert client.post(f"{API}{pk}/approve/").status_code == 409
    assert not Run.objects.exists()
    client.force_login(people["owner"])
    assert client.get(f"{API}{pk}/").json()["rejection_reason"] == "uses too much"


@pytest.mark.django_db
def test_only_enabled_endpoints_are_models(client, people, mine, tiny_task, model):
    client.force_login(people["owner"])
    for given in ("off-model", "https://my.own.server/v1", "gpt-unknown"):
        for field in ("model", "fast_model", "edit_model"):
            extra = {field: given} if field == "model" else {"model": "house-model", field: given}
            answer = ask(client, **extra)
            assert answer.status_code == 400, (field, given)
            assert f"no enabled model endpoint named {given!r}; configured: house-model" in answer.json()["detail"]
    assert not Batch.objects.exists()


@pytest.mark.django_db
def test_a_submitter_may_ask_only_for_their_own_agents(client, people, mine, private_agent, tiny_task):
    AgentFactory(name="someone-elses", owner=people["staff"])
    client.force_login(people["stranger"])
    for name in ("owned", "someone-elses", "hidden-hand", "baseline"):
        answer = ask(client, agent=name)
        assert answer.status_code == 400
        assert answer.json()["agent"] == [f"unknown agent '{name}'; valid agents: none"]  # never others' names
    client.force_login(people["owner"])
    answer = ask(client, agent="someone-elses")
    assert answer.json()["agent"] == ["unknown agent 'someone-elses'; valid agents: hidden-hand@1, owned@1"]
    assert not Batch.objects.exists()


@pytest.mark.django_db
def test_limits_and_sizes_are_checked_before_anything_is_written(client, people, mine, tiny_task, settings):
    settings.BENCH_MAX_RUNS_PER_REQUEST = 3
    client.force_login(people["owner"])
    assert "max_steps" in ask(client, max_steps=2**31).json()
    assert "max_cost" in ask(client, max_cost="1000000").json()
    assert ask(client, repeats=0).status_code == 400
    too_many = ask(client, repeats=4)
    assert too_many.status_code == 400 and "at most 3 runs per request" in too_many.json()["detail"]
    assert not Batch.objects.exists()


@pytest.mark.django_db
def test_the_auto_approve_setting_queues_the_runs_at_once(
    client, people, mine, tiny_task, settings, django_capture_on_commit_callbacks
):
    settings.BENCH_AUTO_APPROVE_SUBMISSIONS = True
    client.force_login(people["owner"])
    with django_capture_on_commit_callbacks() as jobs:
        body = ask(client).json()
    assert (body["approval"], body["state"], body["runs"], body["decided_by"]) == ("approved", "approved", 2, None)
    assert len(jobs) == 1 and Run.objects.filter(batch_id=body["id"], origin="executed").count() == 2


@pytest.mark.django_db
def test_an_approval_that_cannot_make_the_runs_leaves_the_submission_pending(client, people, mine, tiny_task):
    client.force_login(people["owner"])
    pk = ask(client).json()["id"]
    tiny_task.task.__class__.objects.filter(pk=tiny_task.task_id).update(is_enabled=False)  # retired meanwhile

    client.force_login(people["staff"])
    answer = client.post(f"{API}{pk}/approve/")
    assert answer.status_code == 400 and "task tiny is retired" in answer.json()["detail"]
    assert (Submission.objects.get(pk=pk).approval, Run.objects.count()) == ("pending", 0)


@pytest.mark.django_db
def test_who_sees_which_submissions(client, people, mine, tiny_task):
    client.force_login(people["owner"])
    pk = ask(client).json()["id"]

    def listed() -> list[int]:
        return [s["id"] for s in client.get(API).json()["results"]]

    assert listed() == [pk]
    client.force_login(people["staff"])
    assert listed() == [pk]
    assert [s["id"] for s in client.get(f"{API}?approval=pending").json()["results"]] == [pk]
    assert client.get(f"{API}?approval=maybe").status_code == 400
    client.force_login(people["stranger"])
    assert listed() == [] and client.get(f"{API}{pk}/").status_code == 404
    client.logout()
    assert client.get(API).status_code == 403 and client.get(f"{API}{pk}/").status_code == 403


@pytest.mark.django_db
def test_requests_for_runs_are_throttled_per_user(client, people, mine, tiny_task, monkeypatch):
    monkeypatch.setattr(RunRequestThrottle, "THROTTLE_RATES", {"run_requests": "1/hour"})
    client.force_login(people["owner"])
    assert ask(client).status_code == 201
    assert ask(client).status_code == 429
    page = client.post(reverse("runner:run_request"), {"agent": mine.pk, "tasks": [tiny_task.task_id], "repeats": 1})
    assert page.status_code == 429 and "too many requests for runs" in page.content.decode()
    assert Batch.objects.count() == 1

    client.force_login(people["staff"])  # per user; staff starting runs count too
    runs = {"agent": "owned", "tasks": ["tiny"]}
    assert client.post("/api/v1/runs/", runs, content_type="application/json").status_code == 201
    assert client.post("/api/v1/runs/", runs, content_type="application/json").status_code == 429


@pytest.mark.django_db
def test_a_batch_records_what_was_asked(mine, tiny_task, people):
    from runner.models import RunLimits

    spec = RunSpec(mine, limits=RunLimits(max_steps=3))
    batch, runs = batch_create(spec=spec, tasks=[tiny_task.task], repeats=2, created_by=people["staff"])
    assert [t.slug for t in batch.tasks.all()] == ["tiny"]
    assert (batch.max_steps, batch.max_time_s, batch.submission.approval, len(runs)) == (3, None, "approved", 2)


@pytest.mark.django_db
def test_the_service_refuses_others_agents_whatever_the_caller(people, mine, tiny_task):
    from runner.agents.submissions import submission_create
    from runner.services import RunRequestError

    with pytest.raises(RunRequestError, match="agent owned is not yours"):
        submission_create(submitter=people["stranger"], spec=RunSpec(mine), tasks=[tiny_task.task])
    assert not Batch.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "refusal"),
    [
        ({"max_steps": 2_147_483_647}, "max_steps 2147483647 is over task tiny's own limit of 10"),
        ({"max_time_s": 121}, "max_time_s 121 is over task tiny's own limit of 120"),
        ({"max_cost": "50.01"}, "max_cost 50.01 is over the most a submitter's run may spend, 50"),
    ],
)
def test_a_submitters_limits_stay_within_the_tasks_and_the_platforms(client, people, mine, tiny_task, model, fields,
                                                                     refusal):  # fmt: skip
    client.force_login(people["owner"])
    answer = ask(client, model="house-model", **fields)
    assert answer.status_code == 400 and refusal in str(answer.json()), answer.content
    assert not Submission.objects.exists()


@pytest.mark.django_db
def test_a_submitters_request_without_a_cost_limit_gets_the_platforms_default_budget(
    client, people, mine, tiny_task, model, settings
):
    settings.BENCH_SUBMISSION_COST_DEFAULT = 2.5
    client.force_login(people["owner"])
    answer = ask(client, model="house-model", max_steps=10, max_time_s=120)
    assert answer.status_code == 201, answer.content
    assert answer.json()["max_cost"] == "2.500000"
    client.force_login(people["staff"])  # staff's own requests keep what they ask for
    staff = AgentFactory(name="staffs", owner=people["staff"], smoke_state="passed", smoke_tested_at=timezone.now())
    body = {"agent": staff.name, "tasks": ["tiny"], "repeats": 1, "model": "house-model", "max_steps": 50}
    answer = client.post(API, body, content_type="application/json")
    assert answer.status_code == 201 and answer.json()["max_cost"] is None, answer.content
