"""A task's own Python packages ([environment] packages): installed once per list by the worker, wheels only,
from the package registry, and seen by the task's prepare.py, its scripts and its eval.py (not by the platform's
own code, which lacks them); a list that cannot be installed is the task's failure, saying why."""

import importlib.util

import pytest

from runner.execution.sandboxes import get_sandbox
from runner.execution.task_packages import packages_folder
from runner.models import Run
from task_bank.package import TaskPackageError, manifest_parse
from task_bank.services import task_import
from tests.factories import TINY_FILES, package_write, validate_now

pytestmark = pytest.mark.django_db(transaction=True)

PACKAGE = "pyfiglet==1.0.2"  # a small pure-Python wheel the platform does not install
TASK_TOML = """
    title = "With packages"
    [metric]
    name = "value"
    higher_is_better = true
    [environment]
    packages = [{packages}]
"""
USES_IT = {
    "scripts/prepare.py": "import pyfiglet\nopen('../env/data.txt', 'w').write('shared data\\n')\n",
    "env/train.py": "import pyfiglet\nopen('value.txt', 'w').write('2.0' if pyfiglet.figlet_format('x') else '0')\n",
    "scripts/eval.py": """
        import os
        import pyfiglet

        def get_score(submission_folder="../env"):
            assert pyfiglet.figlet_format("ok")
            with open(os.path.join(submission_folder, "value.txt")) as fh:
                return float(fh.read())
    """,
}


def import_with(tmp_path, slug: str, packages: list[str]):
    toml = TASK_TOML.format(packages=", ".join(f'"{p}"' for p in packages))
    files = dict(TINY_FILES, **USES_IT, **{"task.toml": toml})
    version, _ = task_import(root=package_write(tmp_path / slug, files), slug=slug)
    return version


def test_the_tasks_packages_are_installed_once_and_its_prepare_script_and_eval_import_them(tmp_path):
    assert importlib.util.find_spec("pyfiglet") is None  # the platform's own environment lacks it
    version = import_with(tmp_path, "figlet", [PACKAGE])
    assert version.task_packages == [PACKAGE]

    validate_now(version)

    version.refresh_from_db()
    assert (version.status, version.baseline_score) == ("ready", 2.0), version.validation_log
    folder = packages_folder([PACKAGE], get_sandbox().python)
    assert (folder / "pyfiglet").is_dir() and (folder / ".installed.json").is_file()
    installed = (folder / ".installed.json").stat().st_mtime
    again = import_with(tmp_path, "figlet-again", [PACKAGE])  # the same list: the same folder, not installed again
    validate_now(again)
    again.refresh_from_db()
    assert again.status == "ready" and (folder / ".installed.json").stat().st_mtime == installed


def test_a_list_that_cannot_be_installed_is_the_tasks_failure_with_pips_words(tmp_path):
    version = import_with(tmp_path, "missing", ["no-such-package-of-mlab-bench==0.0.1"])

    validate_now(version)

    version.refresh_from_db()
    assert version.status == "failed"
    assert "the task's packages ([environment] packages): pip could not install no-such-package-of-mlab-bench" in (
        version.validation_log
    )
    runs = Run.objects.filter(task_version=version).exclude(status="cancelled")
    assert {(r.status, r.failure_kind) for r in runs} == {("failed", "task")}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('packages = "numpy"', "packages must be a list of strings"),
        ('packages = ["numpy @ https://example.org/numpy.whl"]', "not a URL, a path or an option"),
        ('packages = ["--index-url=https://example.org"]', "is not a requirement"),
        ('packages = ["numpy>>1"]', "is not a requirement"),
        ('python = "3.12"', "unknown keys ['python'] in [environment]"),
    ],
)
def test_a_packages_list_that_names_no_registry_package_is_refused(table, message):
    with pytest.raises(TaskPackageError) as refused:
        manifest_parse(f"[environment]\n{table}\n", default_title="x")
    assert message in str(refused.value)
