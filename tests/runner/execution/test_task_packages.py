"""A task's own Python packages ([environment] packages): installed once per list by the worker, wheels only,
from the package registry, and seen by the task's prepare.py, its scripts and its eval.py (not by the platform's
own code, which lacks them); a list that cannot be installed is the task's failure, saying why."""

import importlib.util

import pytest

from runner.execution.sandboxes import get_sandbox
from runner.execution.task_packages import packages_folder
from runner.models import Run
from task_bank.mlagentbench import environment
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
    # its command too (pip's bin/, as MLAgentBench's prepare.py runs the kaggle command)
    "scripts/prepare.py": """
        import subprocess
        import pyfiglet

        subprocess.run(["pyfiglet", "hi"], check=True)
        open("../env/data.txt", "w").write("shared data\\n")
    """,
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


# What a task's code sees: its packages, and the platform's (django) unless they are its whole environment.
SEES = {
    "env/train.py": """
        import importlib.util
        import pyfiglet

        sees = importlib.util.find_spec("django") is not None
        open("value.txt", "w").write("1.0" if sees else "2.0")
    """,
    "scripts/eval.py": """
        import importlib.util
        import os

        def get_score(submission_folder="../env"):
            with open(os.path.join(submission_folder, "value.txt")) as fh:
                return float(fh.read()) * (10 if importlib.util.find_spec("django") is None else 1)
    """,
}


@pytest.mark.parametrize(("platform", "score"), [("", 1.0), ("platform = false", 20.0)])
def test_a_task_whose_packages_are_its_whole_environment_does_not_see_the_platforms(tmp_path, platform, score):
    toml = TASK_TOML.format(packages=f'"{PACKAGE}"') + f"    {platform}\n"
    version, _ = task_import(root=package_write(tmp_path / "alone", dict(TINY_FILES, **SEES, **{"task.toml": toml})))
    assert version.packages_alone is bool(platform)
    validate_now(version)
    version.refresh_from_db()
    # The starter and eval.py each see django (the platform's) only when the task's packages are added to them.
    assert (version.status, version.baseline_score) == ("ready", score), version.validation_log


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('packages = ["numpy"]\nplatform = "no"', "platform must be true or false"),
        ("platform = false", "platform = false needs the packages that replace them"),
        ('packages = "numpy"', "packages must be a list of strings"),
        ('packages = ["numpy @ https://example.org/numpy.whl"]', "not a URL, a path or an option"),
        ('packages = ["--index-url=https://example.org"]', "is not a requirement"),
        ('packages = ["numpy>>1"]', "is not a requirement"),
        ('python = "3.12"', "unknown keys ['python'] in [environment]; expected packages, platform"),
    ],
)
def test_a_packages_list_that_names_no_registry_package_is_refused(table, message):
    with pytest.raises(TaskPackageError) as refused:
        manifest_parse(f"[environment]\n{table}\n", default_title="x")
    assert message in str(refused.value)


# vectorization's starter stores a (1, 1, 1) array as one element of another: NumPy 1.x converts it, NumPy 2 refuses.
VECTORIZATION = {
    "env/train.py": """
        import numpy as np

        out = np.zeros(2)
        out[0] = np.ones((1, 1, 1)) * 3
        open("value.txt", "w").write(str(out[0]))
    """,
}


def bare_folder(tmp_path, name: str, files: dict | None = None):
    files = {rel: text for rel, text in dict(TINY_FILES, **(files or {})).items() if rel != "task.toml"}
    version, _ = task_import(root=package_write(tmp_path / name, files), metric_name="value", higher_is_better=True)
    return version


def test_a_bare_mlagentbench_folder_gets_mlagentbench_environment_pinned(settings, tmp_path):
    settings.BENCH_BARE_FOLDER_PACKAGES = "mlagentbench"  # the default (the suite's is "none": it is GBs)
    version = bare_folder(tmp_path, "house-price")
    assert version.task_packages == list(environment()) and version.packages_alone  # its whole environment
    pins = dict(spec.split("==") for spec in environment())
    assert len(pins) == len(environment())  # each package pinned, once
    assert pins["numpy"].startswith("1.")
    assert {"torch", "torchvision", "transformers", "datasets", "torch-geometric", "ogb", "xgboost", "keras",
            "tensorflow", "kaggle", "pandas", "scikit-learn"} <= set(pins)  # fmt: skip
    with_toml, _ = task_import(root=package_write(tmp_path / "own", TINY_FILES))
    assert with_toml.task_packages == []  # a folder with a task.toml lists its own


def test_vectorizations_starter_runs_under_mlagentbenchs_numpy_1_and_fails_under_numpy_2(settings, tmp_path):
    settings.BENCH_BARE_FOLDER_PACKAGES = "none"
    on_ours = bare_folder(tmp_path / "ours", "vectorization", VECTORIZATION)
    validate_now(on_ours)
    on_ours.refresh_from_db()
    assert on_ours.status == "failed" and "setting an array element with a sequence" in on_ours.validation_log

    settings.BENCH_BARE_FOLDER_PACKAGES = "numpy==1.24.3"  # the environment's numpy, on its own
    files = dict(VECTORIZATION, **{"env/notes.txt": "another version\n"})
    on_its_numpy = bare_folder(tmp_path / "its", "vectorization", files)
    assert on_its_numpy.task_packages == ["numpy==1.24.3"]
    validate_now(on_its_numpy)
    on_its_numpy.refresh_from_db()
    assert (on_its_numpy.status, on_its_numpy.baseline_score) == ("ready", 3.0), on_its_numpy.validation_log


def test_a_bare_folder_packages_setting_that_names_no_registry_package_is_refused(settings, tmp_path):
    settings.BENCH_BARE_FOLDER_PACKAGES = "numpy==1.24.3 --index-url=https://example.org"
    with pytest.raises(TaskPackageError) as refused:
        bare_folder(tmp_path, "imdb")
    assert "BENCH_BARE_FOLDER_PACKAGES: package '--index-url=https://example.org' is not a requirement" in str(
        refused.value
    )
