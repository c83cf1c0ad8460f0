"""Validation that cannot be fooled: a baseline is ready only when the starter script ran, eval.py measured a score
and the measured scores agree; it is the mean of several runs, and every value is kept."""

import pytest
from django.core.management import CommandError, call_command

from runner.execution import run_execute
from runner.execution.preparation import cache_dir, task_version_prepare
from runner.execution.sandboxes import get_sandbox
from runner.execution.validation import task_version_validate_queue
from runner.models import Run
from task_bank.services import task_import
from tests.factories import TINY_FILES, package_write, validate_now

pytestmark = pytest.mark.django_db(transaction=True)

# MLAgentBench's vectorization task, in miniature: the script dies and eval.py falls back to a huge "time".
CRASHING_SCRIPT = """
    import numpy as np
    rows = [[1.0, 2.0], [3.0]]
    np.array(rows, dtype=float)
"""
FALLBACK_EVAL = """
    import os

    def get_score(submission_folder="../env"):
        try:
            with open(os.path.join(submission_folder, "value.txt")) as fh:
                return float(fh.read())
        except OSError:
            return 1e10
"""
# The score comes from a file the test changes between the baseline runs (a noisy metric, made deterministic).
NOISE_EVAL = """
    def get_score(submission_folder="../env"):
        with open("noise.txt") as fh:
            return float(fh.read())
"""


def import_tiny(tmp_path, slug: str, **files: str):
    overrides = {rel.replace("__", "/").replace("_dot_", "."): text for rel, text in files.items()}
    version, _ = task_import(root=package_write(tmp_path / slug, dict(TINY_FILES, **overrides)), slug=slug)
    return version


def test_a_crashing_starter_script_fails_validation_with_its_own_error_quoted(tmp_path):
    version = import_tiny(tmp_path, "crash", env__train_dot_py=CRASHING_SCRIPT, scripts__eval_dot_py=FALLBACK_EVAL)

    validate_now(version)

    version.refresh_from_db()
    assert version.status == "failed" and version.baseline_score is None
    assert "the starter script train.py failed: ValueError: setting an array element with a sequence" in (
        version.validation_log
    )
    runs = Run.objects.filter(task_version=version, purpose="validation")
    assert sorted(runs.values_list("status", flat=True)) == ["cancelled", "cancelled", "finished"]  # decided at once


def test_a_failing_prepare_py_is_the_tasks_failure_never_the_agents_nor_the_platforms(tmp_path):
    """prepare.py is the task's own code: its failure fails the version, and a benchmark run that needed the version
    ends as the task's failure, which rankings do not count (it was the platform's, shown as an infrastructure
    failure, and the validation runs' was the agent's)."""
    from runner.services import run_create
    from tests.factories import AgentFactory

    prepare = "print('HIDDEN-ANSWERS 3 1 4')\nraise SystemExit('no data here')\n"
    version = import_tiny(tmp_path, "broken", scripts__prepare_dot_py=prepare)
    run = run_create(task=version.task, agent=AgentFactory(config={"script": []}), enqueue=False)
    run = run_execute(run.pk)

    version.refresh_from_db()
    assert version.status == "failed"
    validation = Run.objects.filter(task_version=version, purpose="validation").exclude(status="cancelled")
    assert {(r.status, r.failure_kind) for r in validation} == {("failed", "task")}
    assert (run.status, run.failure_kind) == ("failed", "task")
    assert "failed validation" in run.error
    # What prepare.py printed is in the log staff read, not in the run's error, which the API shows to anyone.
    assert "HIDDEN-ANSWERS" in version.validation_log and "HIDDEN-ANSWERS" not in run.error
    assert not Run.objects.trials().counted().filter(pk=run.pk).exists()
    assert not Run.objects.trials().infrastructure_failures().filter(pk=run.pk).exists()


def test_a_fallback_score_is_not_a_baseline(tmp_path):
    fallback = "def get_score(submission_folder='../env'):\n    return 1e10\n"
    version = import_tiny(tmp_path, "fallback", scripts__eval_dot_py=fallback)

    validate_now(version)

    version.refresh_from_db()
    assert version.status == "failed"
    assert "eval.py returned 1e+10, which looks like a fallback" in version.validation_log


def test_the_baseline_is_the_mean_of_three_runs_and_every_value_is_kept(tiny_task):
    validate_now(tiny_task)

    tiny_task.refresh_from_db()
    assert tiny_task.status == "ready"
    assert tiny_task.baseline_scores == [2.0, 2.0, 2.0] and tiny_task.baseline_score == 2.0
    assert tiny_task.baseline_spread == 0.0
    assert Run.objects.filter(task_version=tiny_task, purpose="validation", status="finished").count() == 3
    assert "the mean of 3 runs (2, 2, 2; relative spread 0.0%)" in tiny_task.validation_log


def run_round_with_scores(version, scores: list[float]) -> None:
    """Validate, the eval's score set before each baseline run."""
    task_version_prepare(version, sandbox=get_sandbox())
    noise = cache_dir(version) / "scripts" / "noise.txt"
    for run, score in zip(task_version_validate_queue(version=version, enqueue=False), scores, strict=True):
        noise.chmod(0o644)
        noise.write_text(str(score))
        run_execute(run.pk)
    version.refresh_from_db()


def test_a_baseline_too_noisy_for_the_threshold_fails_validation_and_says_what_to_do(tmp_path):
    version = import_tiny(tmp_path, "noisy", scripts__eval_dot_py=NOISE_EVAL, scripts__noise_dot_txt="2.0")

    run_round_with_scores(version, [2.0, 2.2, 1.8])  # relative spread 10%: 3 x 10% > the 10% threshold

    assert version.status == "failed" and version.baseline_score is None
    assert version.baseline_scores == [2.0, 2.2, 1.8]
    assert "too noisy for the success threshold of 10%" in version.validation_log
    assert "metric.success_threshold" in version.validation_log and "metric.timed" in version.validation_log


def test_a_baseline_that_varies_little_is_ready(tmp_path):
    version = import_tiny(tmp_path, "steady", scripts__eval_dot_py=NOISE_EVAL, scripts__noise_dot_txt="2.0")

    run_round_with_scores(version, [2.0, 2.02, 1.98])  # relative spread 1%

    assert version.status == "ready" and version.baseline_score == pytest.approx(2.0)
    assert version.baseline_spread == pytest.approx(0.01)


def test_validate_task_exits_non_zero_quoting_the_error_and_takes_a_number_of_repeats(tmp_path, tiny_task):
    import_tiny(tmp_path, "crash", env__train_dot_py=CRASHING_SCRIPT, scripts__eval_dot_py=FALLBACK_EVAL)
    with pytest.raises(CommandError, match="ValueError: setting an array element with a sequence"):
        call_command("validate_task", "crash")

    call_command("validate_task", "tiny", "--repeats", "2")
    tiny_task.refresh_from_db()
    assert tiny_task.baseline_scores == [2.0, 2.0]


def test_a_score_exactly_at_the_threshold_is_not_a_success(tiny_task):
    validate_now(tiny_task)
    tiny_task.refresh_from_db()

    tiny_task.success_threshold = 0.25  # exact in binary, so the improvement can equal it exactly
    assert tiny_task.succeeded_with(2.5) is False  # +25% exactly: MLAgentBench's comparison is strict
    assert tiny_task.succeeded_with(2.5000001) is True


def test_the_task_page_shows_every_baseline_value_and_a_failures_cause_to_staff(
    client, admin_client, tmp_path, tiny_task
):
    validate_now(tiny_task)
    page = client.get("/tasks/tiny/").content.decode()
    assert "the mean of 3 runs (2.0000, 2.0000, 2.0000; relative spread 0.0%)" in page

    import_tiny(tmp_path, "crash", env__train_dot_py=CRASHING_SCRIPT, scripts__eval_dot_py=FALLBACK_EVAL)
    with pytest.raises(CommandError):
        call_command("validate_task", "crash")
    assert client.get("/tasks/crash/").status_code == 404  # hidden from visitors until it is mended
    page = admin_client.get("/tasks/crash/").content.decode()
    assert "Validation failed." in page and "ValueError: setting an array element with a sequence" in page


def test_a_task_that_failed_validation_says_so_in_the_api_and_takes_no_runs(tmp_path, admin_client):
    version = import_tiny(tmp_path, "crash", env__train_dot_py=CRASHING_SCRIPT, scripts__eval_dot_py=FALLBACK_EVAL)
    validate_now(version)

    listed = admin_client.get("/api/v1/tasks/crash/").json()["current_version"]
    assert listed["status"] == "failed" and "ValueError" in listed["validation_summary"]
    response = admin_client.post(
        "/api/v1/runs/", {"agent": "baseline", "tasks": ["crash"]}, content_type="application/json"
    )
    assert response.status_code == 400 and "failed validation and cannot run" in response.json()["detail"]
    assert not Run.objects.filter(task_version=version, purpose="benchmark").exists()


@pytest.mark.django_db(transaction=True)
def test_with_the_queue_unreachable_a_validation_round_is_still_queued_for_whoever_runs_it(tiny_task, broker_down):
    runs = task_version_validate_queue(version=tiny_task, enqueue=True)

    assert len(runs) == 3
    assert list(Run.objects.order_by("pk").values_list("pk", "status", "sent_at")) == [
        (run.pk, "queued", None) for run in runs
    ]
    tiny_task.refresh_from_db()
    assert tiny_task.status == "validating"


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_validation_waits_in_the_queue_runs_it_instead_of_waiting_for_it(tmp_path):
    """A worker stopped during a task's first validation comes back to the benchmark run first; the validation
    runs wait in the queue behind it. With one worker they never ran: the run waited for them until its limit.
    The run now runs them itself, and goes on once the version is ready."""
    from runner.services import run_create
    from tests.factories import AgentFactory

    version = import_tiny(tmp_path, "waiting")
    round_ = task_version_validate_queue(version=version, enqueue=False)  # queued, and nobody runs them
    final = {"type": "act", "action": "Final Answer", "input": {"final_answer": "-"}}
    run = run_create(task=version.task, agent=AgentFactory(config={"script": [final]}), enqueue=False)

    run = run_execute(run.pk)

    version.refresh_from_db()
    assert version.status == "ready"
    assert all(r.status == "finished" for r in Run.objects.filter(pk__in=[r.pk for r in round_]))
    assert (run.status, run.failure_kind) == ("finished", "")


def test_prepare_py_gets_the_deployments_secret_seed_and_the_agent_never_does(tmp_path, settings):
    """A generated task draws its hidden data from BENCH_TASK_SEED, this deployment's own (derived from
    SECRET_KEY), so that no agent can generate the test set again from a public default."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    from runner.actions.environment import script_env

    assert settings.BENCH_TASK_SEED not in ("", "0", "42") and int(settings.BENCH_TASK_SEED) < 2**32
    seeded = "import os\nopen('seed.txt', 'w').write(os.environ['BENCH_TASK_SEED'])\n"
    prepare = seeded + textwrap.dedent(TINY_FILES["scripts/prepare.py"]).lstrip("\n")
    version, _ = task_import(root=package_write(tmp_path / "seeded", TINY_FILES | {"scripts/prepare.py": prepare}))
    task_version_prepare(version, sandbox=get_sandbox())
    assert (cache_dir(version) / "scripts" / "seed.txt").read_text() == settings.BENCH_TASK_SEED
    assert "BENCH_TASK_SEED" not in script_env(cpus=1, gpus=0)

    builtin = Path(__file__).resolve().parents[3] / "task_bank" / "builtin" / "clrs-bellman-ford"
    answers = []
    for seed in ("5", "6"):
        copy = tmp_path / f"clrs-{seed}"
        subprocess.run(["cp", "-r", str(builtin), str(copy)], check=True)
        env = {"BENCH_TASK_SEED": seed, "PATH": "/usr/bin:/bin"}
        subprocess.run([sys.executable, "prepare.py"], cwd=copy / "scripts", env=env, check=True, capture_output=True)
        answers.append((copy / "scripts" / "answer.npz").read_bytes())
    assert answers[0] != answers[1]  # the seed decides the hidden answers


CONSENTING = """
import os
if input("Consent to the competition's rules? Press any key ") != "yes":
    raise SystemExit("no consent")
open("kaggle.txt", "w").write(os.environ.get("KAGGLE_USERNAME", "none"))
with open("../env/data.txt", "w") as fh:
    fh.write("shared data\\n")
with open("answer.txt", "w") as fh:
    fh.write("hidden\\n")
"""


def test_a_prepare_py_that_asks_a_question_is_stopped_quoting_it_and_staff_answer_it_once(tmp_path, admin_client):
    version = import_tiny(tmp_path, "consent", scripts__prepare_dot_py=CONSENTING)
    validate_now(version)
    version.refresh_from_db()
    assert version.status == "failed"
    first = version.validation_log.splitlines()[0]
    assert 'it asked on its standard input: "Consent to the competition\'s rules? Press any key"' in first
    page = admin_client.get("/tasks/consent/").content.decode()
    assert "prepare.py&#x27;s standard input" in page or "prepare.py's standard input" in page

    answered = admin_client.post("/tasks/consent/prepare-answers/", {"answers": "yes\r\n"})
    assert answered.status_code == 302
    version.refresh_from_db()
    assert version.prepare_answers == "yes\n" and version.status in ("pending", "validating")
    for run in Run.objects.filter(task_version=version, status="queued"):
        run_execute(run.pk)
    version.refresh_from_db()
    assert version.status == "ready", version.validation_log
    assert (cache_dir(version) / "scripts" / "kaggle.txt").read_text() == "none"  # no credentials configured


def test_kaggle_credentials_reach_prepare_py_only_where_it_may_reach_the_network(settings):
    from runner.execution.preparation import prepare_secrets

    settings.BENCH_KAGGLE_USERNAME, settings.BENCH_KAGGLE_KEY = "ada", "k3y"
    assert prepare_secrets(network=True) == {
        "BENCH_TASK_SEED": settings.BENCH_TASK_SEED, "KAGGLE_USERNAME": "ada", "KAGGLE_KEY": "k3y"
    }  # fmt: skip
    assert prepare_secrets(network=False) == {"BENCH_TASK_SEED": settings.BENCH_TASK_SEED}
