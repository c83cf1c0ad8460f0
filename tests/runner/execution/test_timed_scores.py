"""Timed tasks: the final score is measured paired with the baseline, on the same worker, alternately, with the
starter script run afresh each time; so noise does not decide success and a planted timing file counts for nothing."""

import json
import textwrap

import pytest

from runner.execution import run_execute
from runner.models import Run
from runner.services import run_create
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, package_write, validate_now

pytestmark = pytest.mark.django_db(transaction=True)

FINAL = {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}}
# As MLAgentBench's vectorization does: the script times itself and appends the time to a file eval.py reads.
TIMED_SCRIPT = """
    import time
    started = time.perf_counter()
    time.sleep({sleep})
    with open("submission.csv", "a+") as fh:
        fh.write(f"{{time.perf_counter() - started}}\\n")
"""
TIMED_EVAL = """
    import os

    def get_score(submission_folder="../env"):
        with open(os.path.join(submission_folder, "submission.csv")) as fh:
            return float(fh.readline())
"""
TIMED_TOML = """
    title = "Timed"
    [metric]
    name = "seconds"
    higher_is_better = false
    [limits]
    max_steps = 10
    max_time_s = 300
"""


@pytest.fixture
def timed_task(tmp_path, settings):
    settings.BENCH_TIMED_ROUNDS = 3
    files = dict(
        TINY_FILES,
        **{"task.toml": TIMED_TOML, "env/train.py": TIMED_SCRIPT.format(sleep=1.0), "scripts/eval.py": TIMED_EVAL},
    )
    version, _ = task_import(root=package_write(tmp_path / "timed", files), slug="timed")
    validate_now(version)
    version.refresh_from_db()
    assert version.status == "ready" and version.timed
    return version


def run_script(version, script: list[dict]) -> Run:
    run = run_create(task=version.task, agent=AgentFactory(config={"script": script}), enqueue=False)
    return run_execute(run.pk)


def test_validation_records_what_the_starter_script_writes_and_scores_each_run_once(timed_task):
    assert timed_task.script_outputs == ["submission.csv"]
    validations = Run.objects.filter(task_version=timed_task, purpose="validation")
    assert [r.eval_measurements for r in validations] == [{}, {}, {}]  # not paired: it is the baseline


def test_an_unchanged_script_is_measured_paired_and_does_not_succeed(timed_task):
    run = run_script(
        timed_task, [{"type": "act", "action": "Execute Script", "input": {"script_name": "train.py"}}, FINAL]
    )

    assert run.status == "finished"
    assert len(run.eval_measurements["baseline"]) == 3 and len(run.eval_measurements["final"]) == 3
    assert run.paired_baseline == pytest.approx(1.0, abs=0.3) and run.final_score == pytest.approx(1.0, abs=0.3)
    assert abs(run.improvement) < 0.10 and run.succeeded is False


def test_a_faster_script_succeeds_against_the_paired_baseline(timed_task):
    faster = textwrap.dedent(TIMED_SCRIPT.format(sleep=0.2))
    write = {"type": "act", "action": "Write File", "input": {"file_name": "train.py", "content": faster}}
    run = run_script(timed_task, [write, FINAL])

    assert run.final_score is not None, (run.eval_error, run.eval_measurements)
    assert run.final_score < 0.5 and run.paired_baseline > 0.8
    assert run.improvement > 0.5 and run.succeeded is True


def test_a_planted_timing_file_is_timed_again(timed_task):
    plant = {"type": "act", "action": "Write File", "input": {"file_name": "submission.csv", "content": "0.001\n"}}
    run = run_script(timed_task, [plant, FINAL])

    assert run.final_score > 0.8  # the script ran again; the planted number was removed first
    assert run.succeeded is False


def test_an_imported_logs_script_is_never_run_so_its_timed_run_has_no_score(timed_task, tmp_path):
    """An uploaded log is data: the script that would time its final workspace is not run (its planted timing file
    is not believed either), and the run says why it has no score."""
    from runner.logs.imports import NOT_RUN, log_import

    env_log = tmp_path / "log" / "env_log"
    final = env_log / "traces" / "step_final_files"
    final.mkdir(parents=True)
    (final / "train.py").write_text(textwrap.dedent(TIMED_SCRIPT.format(sleep=0)))
    (final / "submission.csv").write_text("0.001\n")
    step = {"action": {"name": "Final Answer", "args": {"final_answer": "done"}}, "observation": "end"}
    (env_log / "trace.json").write_text(json.dumps({"steps": [{**step, "timestamp": 1.7e9}]}))
    (env_log / "overall_time.txt").write_text("5")

    run = log_import(source=tmp_path / "log", task_slug="timed", agent_name="theirs")

    assert run.final_score is None
    assert run.eval_error == NOT_RUN
