"""Every built-in task validates: prepare.py builds its data offline in the sandbox, the baseline agent runs
the starter script unchanged, eval.py scores it. (How long each takes is measured by validate_task and listed in
docs/builtin-tasks.md; a test on a busy machine does not assert it.)"""

import math

import pytest
from django.core.management import call_command

from task_bank.models import Task
from task_bank.package import package_load
from task_bank.services import builtin_task_dirs

BUILTIN = [path.name for path in builtin_task_dirs()]


def test_the_suite_covers_the_papers_categories():
    categories = {package_load(path).manifest.category for path in builtin_task_dirs()}
    assert len(BUILTIN) >= 11
    assert categories == {"canonical", "classic_kaggle", "recent_kaggle", "research", "code_improvement"}


@pytest.mark.builtin
@pytest.mark.timeout(1200)  # the heaviest preparations (embeddings, a language model) on a loaded machine
@pytest.mark.parametrize("slug", BUILTIN)
@pytest.mark.django_db(transaction=True)
def test_a_builtin_task_validates(slug, capsys):
    call_command("load_builtin_tasks")
    call_command("validate_task", slug, "--repeats", "1")  # that each works; repeats are tested on small tasks

    version = Task.objects.get(slug=slug).current_version
    assert version.status == "ready", version.validation_log
    assert math.isfinite(version.baseline_score)
    assert version.data_license, "every built-in task states its data licence"
    print(f"{slug}: baseline {version.metric_name} = {version.baseline_score:.6g} in {version.baseline_time_s:.1f} s")
