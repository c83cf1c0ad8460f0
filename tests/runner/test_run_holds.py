"""A task's ceiling (the best an honest method reaches): a verified trial beyond it is held for review, counted by
rankings only once a reviewer clears it, never once rejected; the queue shows why each was held."""

import pytest
from django.contrib.auth.models import AnonymousUser, Group
from django.urls import reverse

from core.roles import REVIEWER_GROUP
from leaderboard.selectors import leaderboard_rows
from runner.execution import run_execute
from runner.models import Run
from runner.services import run_create
from task_bank.package import TaskPackageError, manifest_parse
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, package_write, validate_now

pytestmark = pytest.mark.django_db(transaction=True)

CEILING = TINY_FILES["task.toml"] + "    ceiling = {ceiling}\n"


def write(value: str) -> list[dict]:
    return [
        {"type": "act", "action": "Write File", "input": {"file_name": "value.txt", "content": value}},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]


@pytest.fixture
def capped(tmp_path):
    """The tiny task (train.py writes 2.0, higher is better) with a ceiling of 3.0."""
    toml = TINY_FILES["task.toml"].replace("higher_is_better = true", "higher_is_better = true\n        ceiling = 3.0")
    version, _ = task_import(root=package_write(tmp_path / "capped", dict(TINY_FILES, **{"task.toml": toml})))
    validate_now(version)
    version.refresh_from_db()
    assert (version.status, version.ceiling) == ("ready", 3.0), version.validation_log
    return version


def run_writing(version, value: str) -> Run:
    agent = AgentFactory(config={"script": write(value)})
    return run_execute(run_create(task=version.task, agent=agent, enqueue=False).pk)


def counted(agent) -> int:
    rows = [row for row in leaderboard_rows(viewer=AnonymousUser()) if row["agent__name"] == agent.name]
    return rows[0]["runs"] if rows else 0


def test_a_run_beyond_the_ceiling_is_held_and_counted_only_once_a_reviewer_clears_it(capped, client, admin_user):
    below = run_writing(capped, "2.5")
    assert (below.review, below.final_score, counted(below.agent)) == ("", 2.5, 1)
    held = run_writing(capped, "9.5")
    assert (held.status, held.final_score, held.succeeded, held.review) == ("finished", 9.5, True, "held")
    assert "its final score 9.5 is above the task's ceiling 3, the best an honest method reaches" in held.review_reason
    assert counted(held.agent) == 0

    page = client.get(reverse("runner:run_detail", args=[held.pk])).content.decode()
    assert "Held for review" in page and "above the task&#x27;s ceiling 3" in page
    assert client.get(reverse("runner:run_held")).status_code == 403  # reviewers and staff only
    client.force_login(admin_user)
    queue = client.get(reverse("runner:run_held")).content.decode()
    assert f'data-run="{held.pk}"' in queue and f'data-run="{below.pk}"' not in queue
    assert "Runs to review (1)" in queue  # the header's link

    answer = client.post(reverse("runner:run_hold_decide", args=[held.pk]), {"decision": "clear", "note": "read it"})
    assert answer.status_code == 302
    held.refresh_from_db()
    assert (held.review, held.review_note, held.reviewed_by) == ("cleared", "read it", admin_user)
    assert counted(held.agent) == 1  # the cached leaderboard saw the change (the runs' trigger watches review)
    page = client.get(reverse("runner:run_detail", args=[held.pk])).content.decode()
    assert "Cleared by a reviewer" in page and "read it" in page


def test_a_rejected_run_is_never_counted_and_a_rejection_says_why(capped, client, django_user_model):
    held = run_writing(capped, "9.5")
    reviewer = django_user_model.objects.create_user("rev", password="x")
    reviewer.groups.add(Group.objects.get_or_create(name=REVIEWER_GROUP)[0])
    client.force_login(reviewer)
    client.post(reverse("runner:run_hold_decide", args=[held.pk]), {"decision": "reject", "note": ""})
    held.refresh_from_db()
    assert held.review == "held"  # a rejection needs a reason
    client.post(reverse("runner:run_hold_decide", args=[held.pk]), {"decision": "reject", "note": "copied answers"})
    held.refresh_from_db()
    assert (held.review, held.review_note) == ("rejected", "copied answers")
    assert counted(held.agent) == 0
    again = client.post(reverse("runner:run_hold_decide", args=[held.pk]), {"decision": "clear"}, follow=True)
    assert "is not held for review (any more)" in again.content.decode()
    assert Run.objects.get(pk=held.pk).review == "rejected"


def test_a_lower_is_better_ceiling_holds_scores_below_it_and_validation_runs_are_never_held(tmp_path):
    toml = TINY_FILES["task.toml"].replace("higher_is_better = true", "higher_is_better = false\n        ceiling = 1.0")
    version, _ = task_import(root=package_write(tmp_path / "low", dict(TINY_FILES, **{"task.toml": toml})))
    validate_now(version)  # its baseline runs score 2.0: above a lower-is-better ceiling, never held anyway
    assert not Run.objects.filter(task_version=version).exclude(review="").exists()
    assert run_writing(version, "0.5").review == "held"
    assert run_writing(version, "1.5").review == ""


@pytest.mark.parametrize("ceiling", ['"high"', "true"])
def test_a_ceiling_that_is_no_number_is_refused(ceiling):
    with pytest.raises(TaskPackageError, match="metric.ceiling must be a number"):
        manifest_parse(f"[metric]\nceiling = {ceiling}\n", default_title="x")
