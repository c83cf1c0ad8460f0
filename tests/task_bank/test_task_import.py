import pytest

from task_bank.models import Task, TaskVersion
from task_bank.package import TaskPackageError, package_load
from task_bank.services import task_import
from tests.factories import TINY_FILES, package_write


def test_a_package_without_eval_is_refused_naming_what_is_missing(tmp_path):
    root = package_write(tmp_path / "t", drop=("scripts/eval.py",))
    with pytest.raises(TaskPackageError, match=r"missing scripts/eval.py defining get_score"):
        package_load(root)


def test_an_eval_without_get_score_is_refused(tmp_path):
    root = package_write(tmp_path / "t", TINY_FILES | {"scripts/eval.py": "def score(folder):\n    return 1\n"})
    with pytest.raises(TaskPackageError, match="does not define get_score"):
        package_load(root)


def test_a_manifest_with_an_unknown_category_is_refused(tmp_path):
    root = package_write(tmp_path / "t", TINY_FILES | {"task.toml": 'category = "astrology"\n'})
    with pytest.raises(TaskPackageError, match="category 'astrology' is not one of"):
        package_load(root)


@pytest.mark.django_db
def test_the_metric_direction_must_come_from_the_manifest_or_an_option(tmp_path):
    root = package_write(tmp_path / "t", TINY_FILES | {"task.toml": 'title = "No direction"\n'})
    with pytest.raises(TaskPackageError, match="metric direction is unknown"):
        task_import(root=root)
    assert not Task.objects.exists()

    version, created = task_import(root=root, higher_is_better=False, metric_name="mae")
    assert created and version.higher_is_better is False and version.metric_name == "mae"


@pytest.mark.django_db
def test_importing_the_same_files_twice_makes_one_version_and_a_change_makes_another(tmp_path):
    root = package_write(tmp_path / "tiny")
    first, created_first = task_import(root=root)
    again, created_again = task_import(root=root)
    (root / "env" / "train.py").write_text("print('changed')\n")
    second, created_second = task_import(root=root)

    assert (created_first, created_again, created_second) == (True, False, True)
    assert again.pk == first.pk
    assert second.number == 2 and second.digest != first.digest
    assert Task.objects.get(slug="tiny").current_version == second
    assert TaskVersion.objects.count() == 2


@pytest.mark.django_db
def test_the_builtin_tasks_load(capsys):
    from django.core.management import call_command

    call_command("load_builtin_tasks")
    assert "digits: v1 (new version" in capsys.readouterr().out
    version = Task.objects.get(slug="digits").current_version
    assert version.metric_name == "accuracy" and version.higher_is_better
    assert version.read_only_patterns == ["train.csv", "test.csv"]


def test_the_research_problem_is_kept_byte_for_byte_as_mlagentbench_reads_it(tmp_path):
    problem = "  Improve the model.\n\nKeep train.py's output.\n"
    root = package_write(tmp_path / "t", TINY_FILES | {"scripts/research_problem.txt": "x"})
    (root / "scripts" / "research_problem.txt").write_text(problem)
    assert package_load(root).research_problem == problem
    (root / "scripts" / "research_problem.txt").write_text(" \n")
    with pytest.raises(TaskPackageError, match="research_problem.txt is empty"):
        package_load(root)


@pytest.mark.django_db
@pytest.mark.parametrize("gpus", [0, 1])
def test_a_bare_mlagentbench_folder_gets_the_deployments_gpus(tmp_path, settings, gpus):
    from runner.models import Run

    settings.BENCH_BARE_FOLDER_GPUS = gpus
    files = {rel: text for rel, text in TINY_FILES.items() if rel != "task.toml"}
    version, _ = task_import(root=package_write(tmp_path / "bare", files), metric_name="v", higher_is_better=True)
    assert version.resources["gpus"] == gpus
    assert (Run.queue_for(version=version) == Run.Queue.GPU) is bool(gpus)
