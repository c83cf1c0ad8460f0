"""Who may change what: every page, API endpoint and admin action that changes state, tried as an anonymous
visitor, a signed-up stranger, the owner of the private agent whose run it acts on, and staff. Each row asserts
the answer and the state afterwards: a refusal leaves every run, step and task as it was and queues no job;
staff's request does exactly its work."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from accounts.models import ApiToken
from accounts.services import token_create
from runner.agents.submissions import submission_create
from runner.models import ReviewTag, Run, RunSpec, Step, Submission
from task_bank.models import Task, TaskVersion
from tests.factories import RunFactory, package_write
from tests.task_bank.test_admin_curation import zip_bytes

WHO = ["anonymous", "stranger", "owner", "staff"]


def state() -> dict:
    """Everything a request here could change."""
    return {
        "runs": sorted(Run.objects.values_list("pk", "status", "cancel_requested_at", "task_version_id", "agent_id")),
        "steps": sorted(Step.objects.values_list("pk", "run_id", "index", "score")),
        "tasks": sorted(Task.objects.values_list("pk", "slug", "is_enabled", "current_version_id")),
        "versions": sorted(TaskVersion.objects.values_list("pk", "status")),
        "tags": sorted(ReviewTag.objects.values_list("pk", "run_id", "step_id", "kind", "comment")),
        "submissions": sorted(Submission.objects.values_list("pk", "approval", "decided_by_id", "rejection_reason")),
    }


@dataclass
class Case:
    """One state-changing request, the answer a refusal gets, and what staff's request must have done."""

    send: Callable  # (client, objects) -> response
    refused: Callable  # (who, response) -> bool
    done: Callable  # (objects, before, after, jobs, response) -> None


def page_refused(who, response) -> bool:
    """core.roles.staff_required: a signed-out visitor to the site's sign-in page, anyone else refused."""
    if who == "anonymous":
        return response.status_code == 302 and response.url.startswith(reverse("accounts:login"))
    return response.status_code == 403


def api_refused(who, response) -> bool:
    return response.status_code in ((401, 403) if who == "anonymous" else (403,))


def admin_refused(who, response) -> bool:
    """The admin site sends anyone not staff to its login page."""
    return response.status_code == 302 and response.url.startswith(reverse("admin:login"))


def new_runs(before, after) -> list[Run]:
    old = {row[0] for row in before["runs"]}
    return [Run.objects.get(pk=row[0]) for row in after["runs"] if row[0] not in old]


def assert_again(objects, before, after, jobs, response):
    (again,) = new_runs(before, after)
    source = objects["finished"]
    assert again.status == "queued" and again.purpose == "benchmark"
    assert (again.task_version_id, again.agent_id, again.model) == (
        source.task_version_id,
        source.agent_id,
        source.model,
    )
    assert again.limits == source.limits
    assert not again.steps.exists() and again.forked_from_id is None
    assert len(jobs) == 1  # the new run is sent to a worker
    if response.status_code == 302 and not response.url.startswith("/admin/"):
        assert response.url == reverse("runner:run_detail", args=[again.pk])


def assert_fork(objects, before, after, jobs, response):
    (fork,) = new_runs(before, after)
    source = objects["finished"]
    copied = list(fork.steps.order_by("index").values_list("index", "action", "observation", "snapshot", "inherited"))
    original = list(
        source.steps.filter(index__lte=1).order_by("index").values_list("index", "action", "observation", "snapshot")
    )
    assert copied == [(*row, True) for row in original]  # exactly steps 0..1 of the three
    assert (fork.status, fork.forked_from_id, fork.fork_step, fork.steps_count) == ("queued", source.pk, 1, 2)
    assert fork.task_version_id == source.task_version_id and fork.limits == source.limits
    assert len(jobs) == 1
    assert response.url == reverse("runner:run_detail", args=[fork.pk])


def assert_cancelled(objects, before, after, jobs, response):
    queued = Run.objects.get(pk=objects["queued"].pk)
    assert queued.status == "cancelled"
    assert new_runs(before, after) == [] and before["steps"] == after["steps"]


def assert_scoring_queued(objects, before, after, jobs, response):
    assert len(jobs) == 2  # steps 0 and 2 change the workspace; step 1 shares step 0's snapshot
    assert before == after


def assert_api_created(objects, before, after, jobs, response):
    assert response.status_code == 201
    runs = new_runs(before, after)
    assert [(r.task.slug, r.agent.name, r.status) for r in runs] == [("tiny", "hidden-hand", "queued")]
    assert runs[0].max_steps == 3
    assert len(jobs) == 1


def assert_retired(objects, before, after, jobs, response):
    assert Task.objects.get(pk=objects["task"].pk).is_enabled is False


def assert_enabled(objects, before, after, jobs, response):
    assert Task.objects.get(pk=objects["retired"].pk).is_enabled is True


def assert_validation_queued(objects, before, after, jobs, response):
    runs = new_runs(before, after)
    assert runs and {r.purpose for r in runs} == {"validation"}
    assert TaskVersion.objects.get(pk=objects["task"].current_version_id).status == "validating"


def assert_imported(objects, before, after, jobs, response):
    task = Task.objects.get(slug="uploaded")
    assert task.source == "uploaded" and task.current_version.status == "pending"


def assert_exported(objects, before, after, jobs, response):
    assert response.status_code == 200 and response["Content-Disposition"].endswith('.zip"')
    assert before == after


def review_refused(who, response) -> bool:
    """Tags: a run the requester may not see is a 404 (it does not exist for them), one they may see a 403."""
    return response.status_code in (403, 404)


def assert_tagged(objects, before, after, jobs, response):
    tag = ReviewTag.objects.exclude(pk=objects["tag"].pk).select_related("step").get()
    assert (tag.run_id, tag.step.index, tag.kind, tag.comment) == (objects["finished"].pk, 1, "bad_plan", "why")
    assert response.url.endswith("#step-1")


def assert_untagged(objects, before, after, jobs, response):
    assert not ReviewTag.objects.filter(pk=objects["tag"].pk).exists()


def assert_submission_approved(objects, before, after, jobs, response):
    runs = new_runs(before, after)
    assert [(r.batch_id, r.agent.name, r.status, r.origin) for r in runs] == [
        (objects["pending"].pk, "hidden-hand", "queued", "executed")
    ]
    assert Submission.objects.get(pk=objects["pending"].pk).approval == "approved" and len(jobs) == 1


def assert_submission_rejected(objects, before, after, jobs, response):
    submission = Submission.objects.get(pk=objects["pending"].pk)
    assert (submission.approval, submission.rejection_reason) == ("rejected", "not now")
    assert new_runs(before, after) == [] and jobs == []


def admin_action(changelist: str, action: str, key: str) -> Callable:
    def send(client, objects):
        return client.post(reverse(changelist), {"action": action, "_selected_action": [objects[key].pk]})

    return send


def import_upload(client, objects):
    upload = SimpleUploadedFile("tiny.zip", objects["zip"], content_type="application/zip")
    return client.post(reverse("admin:task_bank_task_import"), {"package": upload, "slug": "uploaded"})


CASES = {
    "page: cancel": Case(
        lambda c, o: c.post(reverse("runner:run_cancel", args=[o["queued"].pk])), page_refused, assert_cancelled
    ),
    "page: run again": Case(
        lambda c, o: c.post(reverse("runner:run_again", args=[o["finished"].pk])), page_refused, assert_again
    ),
    "page: fork": Case(
        lambda c, o: c.post(reverse("runner:run_fork", args=[o["finished"].pk, 1])), page_refused, assert_fork
    ),
    "page: score steps": Case(
        lambda c, o: c.post(reverse("runner:run_score_steps", args=[o["finished"].pk])),
        page_refused,
        assert_scoring_queued,
    ),
    "page: tag a step": Case(
        lambda c, o: c.post(
            reverse("runner:run_tag", args=[o["finished"].pk]), {"kind": "bad_plan", "step": "1", "comment": "why"}
        ),
        review_refused,
        assert_tagged,
    ),
    "page: remove a tag": Case(
        lambda c, o: c.post(reverse("runner:run_tag_remove", args=[o["finished"].pk, o["tag"].pk])),
        review_refused,
        assert_untagged,
    ),
    "api: start runs": Case(
        lambda c, o: c.post(
            "/api/v1/runs/",
            {"agent": "hidden-hand", "tasks": ["tiny"], "max_steps": 3},
            content_type="application/json",
        ),
        api_refused,
        assert_api_created,
    ),
    "api: cancel": Case(lambda c, o: c.post(f"/api/v1/runs/{o['queued'].pk}/cancel/"), api_refused, assert_cancelled),
    "api: approve a submission": Case(
        lambda c, o: c.post(f"/api/v1/submissions/{o['pending'].pk}/approve/"), api_refused, assert_submission_approved
    ),
    "api: reject a submission": Case(
        lambda c, o: c.post(
            f"/api/v1/submissions/{o['pending'].pk}/reject/", {"reason": "not now"}, content_type="application/json"
        ),
        api_refused,
        assert_submission_rejected,
    ),
    "page: approve a submission": Case(
        lambda c, o: c.post(reverse("runner:submission_approve", args=[o["pending"].pk])),
        page_refused,
        assert_submission_approved,
    ),
    "page: reject a submission": Case(
        lambda c, o: c.post(reverse("runner:submission_reject", args=[o["pending"].pk]), {"reason": "not now"}),
        page_refused,
        assert_submission_rejected,
    ),
    "admin: cancel runs": Case(
        admin_action("admin:runner_run_changelist", "cancel_runs", "queued"), admin_refused, assert_cancelled
    ),
    "admin: run again": Case(
        admin_action("admin:runner_run_changelist", "run_again", "finished"), admin_refused, assert_again
    ),
    "admin: score steps": Case(
        admin_action("admin:runner_run_changelist", "score_steps", "finished"), admin_refused, assert_scoring_queued
    ),
    "admin: approve submissions": Case(
        admin_action("admin:runner_submission_changelist", "approve", "pending"),
        admin_refused,
        assert_submission_approved,
    ),
    "admin: retire task": Case(
        admin_action("admin:task_bank_task_changelist", "retire", "task"), admin_refused, assert_retired
    ),
    "admin: enable task": Case(
        admin_action("admin:task_bank_task_changelist", "enable", "retired"), admin_refused, assert_enabled
    ),
    "admin: validate task": Case(
        admin_action("admin:task_bank_task_changelist", "validate", "task"), admin_refused, assert_validation_queued
    ),
    "admin: import a task": Case(import_upload, admin_refused, assert_imported),
    # Not a change, but the zip holds the task's hidden files: only curators may have it.
    "admin: export a task": Case(
        lambda c, o: c.get(reverse("admin:task_bank_task_export", args=[o["task"].pk])), admin_refused, assert_exported
    ),
}


@pytest.fixture
def objects(tmp_path, tiny_task, private_agent, people) -> dict:
    """A finished run of the private agent with three steps, a queued one, the tiny task and a retired one."""
    from runner.workspace.snapshots import BlobStore
    from tests.factories import StepFactory

    store = BlobStore()
    snapshots = [store.manifest_save({"notes.txt": [store.put_bytes(text), len(text)]}) for text in (b"a\n", b"b\n")]
    finished = RunFactory(
        task_version=tiny_task, agent=private_agent, final_score=1.0, steps_count=3, max_steps=7, max_time_s=99
    )
    for index, snapshot in enumerate([snapshots[0], snapshots[0], snapshots[1]]):
        StepFactory(run=finished, index=index, action="Write File", observation=f"step {index}", snapshot=snapshot)
    queued = RunFactory(task_version=tiny_task, agent=private_agent, status="queued")
    retired_version = package_write(tmp_path / "retired")
    from task_bank.services import task_import

    retired, _ = task_import(root=retired_version, slug="retired")
    Task.objects.filter(pk=retired.task_id).update(is_enabled=False)
    # Staff curate: they hold the admin's permissions on runs and tasks (Django's admin asks for them).
    people["staff"].user_permissions.set(Permission.objects.filter(content_type__app_label__in=["runner", "task_bank"]))
    reviewer = people["staff"].__class__.objects.create_user("another-reviewer", password="x", is_staff=True)
    pending, _ = submission_create(submitter=people["owner"], spec=RunSpec(private_agent), tasks=[tiny_task.task])
    return {
        "pending": pending,
        "tag": ReviewTag.objects.create(run=finished, kind="gave_up", author=reviewer),
        "finished": finished,
        "queued": queued,
        "task": tiny_task.task,
        "retired": retired.task,
        "zip": zip_bytes(package_write(tmp_path / "upload")),
    }


@pytest.mark.django_db
@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("name", list(CASES))
def test_only_staff_change_state(name, who, client, people, objects, django_capture_on_commit_callbacks):
    case = CASES[name]
    if who != "anonymous":
        client.force_login(people[who])
    before = state()
    with django_capture_on_commit_callbacks() as jobs:
        response = case.send(client, objects)
    after = state()

    if who == "staff":
        assert not case.refused(who, response), f"staff was refused: {response.status_code}"
        assert response.status_code in (200, 201, 302)
        case.done(objects, before, after, jobs, response)
    else:
        assert case.refused(who, response), f"{who} got {response.status_code}"
        assert after == before, f"{who}'s refused request changed something"
        assert jobs == [], f"{who}'s refused request queued a job"


# --- Asking for runs -----------------------------------------------------------------------------------------
# Anyone signed in may ask for runs, of their own agents only: the owner's request waits for staff, staff's is
# approved at once, a stranger's (not their agent) is refused and a visitor's too, leaving nothing behind.


@pytest.mark.django_db
@pytest.mark.parametrize("who", WHO)
def test_runs_are_asked_for_by_the_agents_owner_or_staff(who, client, people, tiny_task, private_agent,
                                                         django_capture_on_commit_callbacks):  # fmt: skip
    if who != "anonymous":
        client.force_login(people[who])
    before = state()
    with django_capture_on_commit_callbacks() as jobs:
        api = client.post(
            "/api/v1/submissions/", {"agent": "hidden-hand", "tasks": ["tiny"]}, content_type="application/json"
        )
        page = client.post(reverse("runner:run_request"), {"agent": private_agent.pk, "tasks": [tiny_task.task_id],
                                                           "repeats": 1})  # fmt: skip
    after = state()
    if who in ("anonymous", "stranger"):
        assert api.status_code == (403 if who == "anonymous" else 400)
        assert page.status_code == (302 if who == "anonymous" else 400)
        assert after == before and jobs == []
        return
    assert (api.status_code, page.status_code) == (201, 302)
    made = Submission.objects.order_by("pk")
    assert [s.approval for s in made] == ["approved" if who == "staff" else "pending"] * 2
    assert len(new_runs(before, after)) == (2 if who == "staff" else 0)


# --- Account pages -------------------------------------------------------------------------------------------
# Signing up, in and out and the password pages change only the account of whoever sends them (or make one):
# tests/test_accounts.py covers them. API tokens are made and revoked on the account page, by their owner only:
# staff included, nobody revokes someone else's token there (the admin lists tokens for that).


def tokens_state() -> list:
    return sorted(ApiToken.objects.values_list("pk", "user__username", "name"))


@pytest.mark.django_db
@pytest.mark.parametrize("who", WHO)
def test_tokens_are_made_and_revoked_by_their_owner_only(who, client, people):
    owners = token_create(user=people["owner"], name="owner's").token
    if who != "anonymous":
        client.force_login(people[who])
    before = tokens_state()

    created = client.post(reverse("accounts:token_create"), {"name": "mine"})
    revoked = client.post(reverse("accounts:token_revoke", args=[owners.pk]))

    after = tokens_state()
    if who == "anonymous":
        for response in (created, revoked):
            assert response.status_code == 302 and response.url.startswith(reverse("accounts:login"))
        assert after == before
        return
    username = people[who].username
    assert created.status_code == 201
    new = [row for row in after if row not in before]
    assert [(user, name) for _, user, name in new] == [(username, "mine")]
    assert revoked.status_code == 302
    assert ApiToken.objects.filter(pk=owners.pk).exists() == (who != "owner")
