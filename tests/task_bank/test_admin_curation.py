import io
import zipfile

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from runner.models import Run
from task_bank.models import Task

from ..factories import package_write


def tiny_zip_bytes(tmp_path) -> bytes:
    root = package_write(tmp_path / "tiny")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                archive.write(path, "tiny/" + path.relative_to(root).as_posix())
    return buffer.getvalue()


def test_an_admin_uploads_a_zip_and_queues_its_validation(admin_client, tmp_path):
    upload = SimpleUploadedFile("tiny.zip", tiny_zip_bytes(tmp_path), content_type="application/zip")
    response = admin_client.post(reverse("admin:task_bank_task_import"), {"package": upload, "slug": "uploaded"})

    task = Task.objects.get(slug="uploaded")
    assert response.status_code == 302 and task.source == "uploaded"
    assert task.current_version.status == "pending"

    response = admin_client.post(
        reverse("admin:task_bank_task_changelist"), {"action": "validate", "_selected_action": [task.pk]}, follow=True
    )
    task.current_version.refresh_from_db()
    assert task.current_version.status == "validating"
    run = Run.objects.get(task=task, purpose="validation")
    assert f'validation queued as <a href="/runs/{run.pk}/">run {run.pk}</a>' in response.content.decode()


def test_a_bad_upload_shows_what_is_wrong_and_imports_nothing(admin_client):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("task/env/train.py", "print(1)\n")
    upload = SimpleUploadedFile("task.zip", buffer.getvalue(), content_type="application/zip")

    response = admin_client.post(reverse("admin:task_bank_task_import"), {"package": upload})

    html = response.content.decode()
    assert response.status_code == 200
    assert "not a task package; missing a scripts/ folder" in html
    assert not Task.objects.exists()


def test_retire_and_enable(admin_client, tiny_task):
    task = tiny_task.task
    url = reverse("admin:task_bank_task_changelist")
    admin_client.post(url, {"action": "retire", "_selected_action": [task.pk]})
    task.refresh_from_db()
    assert task.status == "retired" and not task.is_enabled
    admin_client.post(url, {"action": "enable", "_selected_action": [task.pk]})
    task.refresh_from_db()
    assert task.is_enabled
