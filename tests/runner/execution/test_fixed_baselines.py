"""A task may declare its baseline ([baseline] in task.toml) instead of measuring it: a starter declared to fail by
design still makes a ready task, the declared value is what improvements are measured against, the task page shows
it with its reason; MLAgentBench's six hand-set baselines come with its task folders. The declared value replaces
the number only: a prepare.py that fails, or a starter not declared to fail, fails the validation."""

import pytest

from runner.execution import run_execute
from runner.services import run_create
from task_bank.package import TaskPackageError, manifest_parse
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, package_write, validate_now
from tests.runner.execution.test_task_validation import CRASHING_SCRIPT

pytestmark = pytest.mark.django_db(transaction=True)

DECLARED = """
    title = "Declared"
    [metric]
    name = "value"
    higher_is_better = true
    [baseline]
    score = 0.5
    reason = "The starter script leaves the model to the agent."
    when = "{when}"
    starter_fails = {starter_fails}
"""
WRITE_FIVE = {"type": "act", "action": "Write File", "input": {"file_name": "value.txt", "content": "0.6"}}
FINAL = {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}}


def import_declared(tmp_path, slug: str, *, when: str, crashing: bool, starter_fails: bool = True, prepare: str = ""):
    files = dict(TINY_FILES, **{"task.toml": DECLARED.format(when=when, starter_fails=str(starter_fails).lower())})
    if prepare:
        files["scripts/prepare.py"] = prepare
    if crashing:
        files["env/train.py"] = CRASHING_SCRIPT
    version, _ = task_import(root=package_write(tmp_path / slug, files), slug=slug)
    return version


def test_a_starter_that_fails_by_design_makes_a_ready_task_with_its_declared_baseline(tmp_path, client):
    version = import_declared(tmp_path, "declared", when="always", crashing=True)

    validate_now(version)

    version.refresh_from_db()
    assert (version.status, version.baseline_score) == ("ready", 0.5)
    assert version.validation_summary == (
        "baseline value = 0.5, declared by the task: The starter script leaves the model to the agent."
    )
    assert "the starter script train.py failed: ValueError" in version.validation_log  # what the round found
    run = run_execute(
        run_create(task=version.task, agent=AgentFactory(config={"script": [WRITE_FIVE, FINAL]}), enqueue=False).pk
    )
    assert (run.status, run.final_score, run.succeeded) == ("finished", 0.6, True)
    assert run.improvement == pytest.approx(0.2)  # against the declared 0.5
    page = client.get("/tasks/declared/").content.decode()
    assert "declared by the task, not measured: The starter script leaves the model to the agent." in page


@pytest.mark.parametrize(("when", "baseline"), [("always", 0.5), ("unmeasured", 2.0)])
def test_a_starter_that_works_is_measured_unless_the_declared_baseline_is_always_the_tasks(tmp_path, when, baseline):
    version = import_declared(tmp_path, f"works-{when}", when=when, crashing=False)

    validate_now(version)

    version.refresh_from_db()
    assert (version.status, version.baseline_score, version.baseline_scores) == ("ready", baseline, [2.0] * 3)


def test_unmeasured_falls_back_to_the_declared_baseline_only_when_the_starter_gives_no_score(tmp_path):
    version = import_declared(tmp_path, "fallback", when="unmeasured", crashing=True)
    validate_now(version)
    version.refresh_from_db()
    assert (version.status, version.baseline_score) == ("ready", 0.5)


def test_a_declared_baseline_does_not_hide_a_starter_that_is_not_declared_to_fail(tmp_path):
    version = import_declared(tmp_path, "undeclared", when="always", crashing=True, starter_fails=False)
    validate_now(version)
    version.refresh_from_db()
    assert version.status == "failed"
    assert "the starter script train.py failed: ValueError" in version.validation_log.splitlines()[0]


def test_a_declared_baseline_does_not_hide_a_prepare_py_that_fails(tmp_path):
    prepare = "raise FileNotFoundError('the data is not there: download it first')\n"
    version = import_declared(tmp_path, "unprepared", when="always", crashing=True, prepare=prepare)
    validate_now(version)
    version.refresh_from_db()
    first = version.validation_log.splitlines()[0]
    assert version.status == "failed" and version.baseline_score is None
    assert "prepare.py exited with code 1" in first
    assert "FileNotFoundError: the data is not there: download it first" in first


@pytest.mark.parametrize(
    ("folder", "score", "summary"),
    [
        ("imdb", 0.5, "baseline value = 0.5, declared by the task: MLAgentBench fixes this task's baseline at 0.5 "
         "(instead of any measured mean)"),
        ("house-price", 1e10, "baseline value = 1e+10, declared by the task: MLAgentBench fixes this task's baseline "
         "at 1e+10 (where none was measured)"),
    ],
)  # fmt: skip
def test_an_mlagentbench_folder_gets_the_baseline_its_plot_py_fixes(tmp_path, folder, score, summary):
    """imdb's and house-price's starters fail by design (they leave the model to the agent)."""
    files = {rel: text for rel, text in TINY_FILES.items() if rel != "task.toml"}  # a bare MLAgentBench folder
    files["env/train.py"] = CRASHING_SCRIPT  # as theirs fail by design
    version, _ = task_import(root=package_write(tmp_path / folder, files), metric_name="value", higher_is_better=True)

    assert version.fixed_baseline["score"] == score
    validate_now(version)
    version.refresh_from_db()
    assert (version.status, version.baseline_score, version.validation_summary) == ("ready", score, summary)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("score = 0.5", "[baseline] needs a reason"),
        ('reason = "r"', "[baseline] needs a score"),
        ('score = 0\nreason = "r"', "baseline.score must not be 0"),
        ('score = 1\nreason = "r"\nwhen = "sometimes"', "[baseline] when must be one of ['always', 'unmeasured']"),
        ('score = 1\nreason = "r"\nvalue = 2', "unknown keys ['value'] in [baseline]"),
        ('score = 1\nreason = "r"\nstarter_fails = "yes"', "[baseline] starter_fails must be true or false"),
    ],
)
def test_a_malformed_baseline_table_is_refused_naming_what_is_wrong(table, message):
    with pytest.raises(TaskPackageError) as refused:
        manifest_parse(f"[baseline]\n{table}\n", default_title="x")
    assert message in str(refused.value)


def test_validate_task_says_the_baseline_is_the_tasks_own(tmp_path):
    import io

    from django.core.management import call_command

    import_declared(tmp_path, "cli", when="always", crashing=True)
    out = io.StringIO()
    call_command("validate_task", "cli", stdout=out)
    assert out.getvalue().strip() == (
        "cli v1 is ready: baseline value = 0.5, declared by the task: The starter script leaves the model to the agent."
    )


def test_an_mlagentbench_folder_whose_starter_should_work_fails_its_validation_when_it_does_not(tmp_path):
    files = {rel: text for rel, text in TINY_FILES.items() if rel != "task.toml"}
    files["env/train.py"] = CRASHING_SCRIPT  # vectorization's starter works under MLAgentBench's numpy 1.x
    version, _ = task_import(
        root=package_write(tmp_path / "vectorization", files), metric_name="value", higher_is_better=True
    )
    assert version.fixed_baseline["score"] == 6.1742 and not version.fixed_baseline["starter_fails"]
    validate_now(version)
    version.refresh_from_db()
    assert version.status == "failed"
    assert "the starter script train.py failed: ValueError" in version.validation_log.splitlines()[0]
