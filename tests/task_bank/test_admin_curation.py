import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from runner.models import Run
from task_bank.models import Task
from tests.factories import TINY_FILES, package_write


def zip_bytes(root) -> bytes:
    """The package folder zipped the way people zip a folder: its files under a top folder of its name."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                archive.write(path, f"{root.name}/" + path.relative_to(root).as_posix())
    return buffer.getvalue()


def tiny_zip_bytes(tmp_path) -> bytes:
    return zip_bytes(package_write(tmp_path / "tiny"))


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
    runs = Run.objects.filter(task=task, purpose="validation").order_by("pk")
    assert runs.count() == 3  # the baseline is measured 3 times unless task.toml says otherwise
    first = runs[0].pk
    assert f'queued as 3 baseline runs, the first <a href="/runs/{first}/">run {first}</a>' in response.content.decode()


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


def test_an_mlagentbench_folder_imports_once_the_admin_gives_the_metric_direction(admin_client, tmp_path):
    url = reverse("admin:task_bank_task_import")
    # As it comes from the MLAgentBench repository: no task.toml, so no metric direction.
    data = zip_bytes(package_write(tmp_path / "house-price", TINY_FILES, drop=("task.toml",)))

    response = admin_client.post(url, {"package": SimpleUploadedFile("house-price.zip", data)})
    assert response.status_code == 200
    assert "does not say whether a higher metric is better" in response.content.decode()
    assert response.context["form"].errors["direction"]
    assert not Task.objects.exists()

    response = admin_client.post(
        url, {"package": SimpleUploadedFile("house-price.zip", data), "direction": "lower", "metric": "mae"}
    )
    task = Task.objects.get(slug="house-price")
    assert response.status_code == 302
    assert task.current_version.higher_is_better is False and task.current_version.metric_name == "mae"
    assert task.current_version.research_problem.startswith("Make value.txt hold")


@pytest.mark.django_db(transaction=True)
def test_the_validation_job_records_its_outcome_and_log_on_the_version(admin_client, tmp_path):
    from runner.execution import run_execute

    files = dict(TINY_FILES, **{"scripts/eval.py": "def get_score(submission_folder='../env'):\n    return 'high'\n"})
    upload = SimpleUploadedFile("broken.zip", zip_bytes(package_write(tmp_path / "broken", files)))
    admin_client.post(reverse("admin:task_bank_task_import"), {"package": upload})
    task = Task.objects.get(slug="broken")
    admin_client.post(reverse("admin:task_bank_task_changelist"), {"action": "validate", "_selected_action": [task.pk]})
    run_execute(Run.objects.filter(task=task, purpose="validation").first().pk)  # what a worker does with a job

    version = task.current_version
    version.refresh_from_db()
    assert version.status == "failed"
    page = admin_client.get(reverse("admin:task_bank_taskversion_change", args=[version.pk])).content.decode()
    assert "Failed" in page and "get_score returned" in page and "&#x27;high&#x27;" in page, version.validation_log


def test_an_admin_exports_a_task_as_a_zip_that_imports_back(admin_client, tiny_task, tmp_path):
    from task_bank.services import task_import_source

    task = tiny_task.task
    response = admin_client.post(
        reverse("admin:task_bank_task_changelist"), {"action": "export", "_selected_action": [task.pk]}, follow=True
    )
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="tiny-v1.zip"'
    data = b"".join(response.streaming_content)
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert "tiny/scripts/eval.py" in names and "tiny/env/train.py" in names
    (tmp_path / "tiny-v1.zip").write_bytes(data)
    version, created = task_import_source(source=tmp_path / "tiny-v1.zip", name="tiny-v1.zip", slug="tiny")
    assert version.pk == tiny_task.pk and not created  # the same files: the same version


def test_staff_without_task_permissions_can_neither_import_nor_export(client, tiny_task, django_user_model):
    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    client.force_login(user)

    assert client.get(reverse("admin:task_bank_task_import")).status_code == 403
    assert client.get(reverse("admin:task_bank_task_export", args=[tiny_task.task.pk])).status_code == 403
