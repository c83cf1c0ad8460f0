"""Staff act on a task from its page (Validate, Retire, Enable); a task whose version failed validation is staff's to
see; the admin shows baselines as the site does."""

import pytest
from django.urls import reverse

from runner.models import Run
from task_bank.models import Task


@pytest.mark.django_db
def test_staff_validate_and_retire_from_the_task_page_and_nobody_else_can(client, people, tiny_task_ready):
    page = reverse("leaderboard:task_detail", args=["tiny"])
    validate = reverse("leaderboard:task_validate", args=["tiny"])
    retire = reverse("leaderboard:task_enabled", args=["tiny"])

    client.force_login(people["stranger"])
    assert "task-validate" not in client.get(page).content.decode()
    assert client.post(validate).status_code == 403 and not Run.objects.exists()  # staff only
    client.post(retire, {"enabled": "0", "confirm": "1"})
    assert Task.objects.get(slug="tiny").is_enabled

    client.force_login(people["staff"])
    shown = client.get(page).content.decode()
    assert "task-validate" in shown and "task-retire" in shown
    response = client.post(validate, follow=True)
    assert "validation queued as 3 baseline runs" in response.content.decode()
    assert Run.objects.filter(purpose=Run.Purpose.VALIDATION, task__slug="tiny").count() == 3
    assert "under way already" in client.post(validate, follow=True).content.decode()
    assert client.get(validate).status_code == 405

    unconfirmed = client.post(retire, {"enabled": "0"}, follow=True).content.decode()
    assert "not retired; tick the box" in unconfirmed and Task.objects.get(slug="tiny").is_enabled
    client.post(retire, {"enabled": "0", "confirm": "1"})
    assert not Task.objects.get(slug="tiny").is_enabled
    assert "task-enable" in client.get(page).content.decode()
    listed = client.get(reverse("leaderboard:task_list")).content.decode()  # staff find it again from the list
    assert 'href="/tasks/tiny/"' in listed and '<span class="badge retired">retired</span>' in listed
    client.force_login(people["stranger"])
    assert 'href="/tasks/tiny/"' not in client.get(reverse("leaderboard:task_list")).content.decode()
    client.force_login(people["staff"])
    client.post(retire, {"enabled": "1"})
    assert Task.objects.get(slug="tiny").is_enabled


@pytest.mark.django_db
def test_a_task_whose_version_failed_validation_is_shown_to_staff_only(client, people, tiny_task):
    tiny_task.status, tiny_task.validation_log = tiny_task.Status.FAILED, "train.py exited 1"
    tiny_task.save(update_fields=["status", "validation_log"])
    page = reverse("leaderboard:task_detail", args=["tiny"])
    tasks = reverse("leaderboard:task_list")

    assert client.get(page).status_code == 404 and 'href="/tasks/tiny/"' not in client.get(tasks).content.decode()
    assert client.get("/api/v1/tasks/tiny/").status_code == 404
    client.force_login(people["stranger"])
    assert client.get(page).status_code == 404
    client.force_login(people["staff"])
    assert client.get(page).status_code == 200 and 'href="/tasks/tiny/"' in client.get(tasks).content.decode()
    assert client.get("/api/v1/tasks/tiny/").json()["current_version"]["status"] == "failed"


@pytest.mark.django_db
def test_the_admin_shows_baselines_to_four_decimals(admin_client, tiny_task_ready):
    tiny_task_ready.baseline_score = 0.75740740740740742
    tiny_task_ready.save(update_fields=["baseline_score"])
    listing = admin_client.get("/admin/task_bank/task/").content.decode()
    assert "0.7574" in listing and "0.757407" not in listing
    versions = admin_client.get("/admin/task_bank/taskversion/").content.decode()
    assert "0.7574" in versions and "0.757407" not in versions
