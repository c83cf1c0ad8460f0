"""Evaluation in two rooms: a served task's submission answers eval.py's requests in the workspace's sandbox,
where no hidden file is, and eval.py scores the answers (data) beside the hidden files, with each request timed by
the platform from outside, from sending it to receiving the whole answer."""

import textwrap

import pytest

from runner.execution import run_execute
from runner.models import Run
from runner.services import run_create
from task_bank.package import TaskPackageError, package_load
from task_bank.services import task_import
from tests.backends import BACKENDS, skip_unless_backend
from tests.factories import AgentFactory, package_write, validate_now

pytestmark = pytest.mark.django_db(transaction=True)

MARKER = "HIDDEN-7f3a9c"
FINAL = {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}}
SERVED_FILES = {
    "task.toml": """
        title = "Served"
        script = "calc.py"
        [metric]
        name = "seconds"
        higher_is_better = false
        [limits]
        max_steps = 10
        max_time_s = 300
        [evaluation]
        serve = "serve.py"
        [validation]
        repeats = 1
    """,
    "scripts/research_problem.txt": "Make calc.double faster.",
    "scripts/read_only_files.txt": "serve.py\n",
    "scripts/prepare.py": f"""
        with open("answers.txt", "w") as fh:
            fh.write("{MARKER} in a hidden file made by prepare.py\\n")
    """,
    "scripts/eval.py": f"""
        # {MARKER}: the hidden scorer
        import json
        import os

        def make_requests(private_folder):
            values = [1.5, 2.5, 3.5]
            with open(os.path.join(private_folder, "expected.json"), "w") as fh:
                json.dump([2 * v for v in values], fh)
            return [str(v).encode() for v in values]

        def score_answers(answers, seconds, private_folder, submission_folder):
            with open(os.path.join(private_folder, "expected.json")) as fh:
                expected = json.load(fh)
            for answer, value in zip(answers, expected, strict=True):
                if float(answer) != value:
                    raise ValueError(f"wrong answer {{answer[:300]!r}}; expected {{value}}")
            return min(seconds)
    """,
    "env/serve.py": """
        import calc

        def load():
            return calc.double

        def answer(double, request):
            return str(float(double(float(request)))).encode()
    """,
    "env/calc.py": """
        import time

        def double(x):
            time.sleep(0.3)
            return 2 * x

        if __name__ == "__main__":
            print(double(1.0))
    """,
}


def served_task(tmp_path, **files):
    version, _ = task_import(root=package_write(tmp_path / "served", {**SERVED_FILES, **files}), slug="served")
    validate_now(version)
    version.refresh_from_db()
    assert version.status == "ready", version.validation_log
    return version


def run_with_calc(version, calc: str) -> Run:
    write = {"type": "act", "action": "Write File", "input": {"file_name": "calc.py", "content": calc}}
    run = run_create(task=version.task, agent=AgentFactory(config={"script": [write, FINAL]}), enqueue=False)
    return run_execute(run.pk)


@pytest.fixture
def served(tmp_path, settings):
    settings.BENCH_TIMED_ROUNDS = 1
    return served_task(tmp_path)


def test_the_baseline_is_each_request_timed_from_outside(served):
    assert served.serve_script == "serve.py"
    # Three requests of at least 0.3 s each, the best of them the score: a lower bound that load cannot break.
    assert served.baseline_score >= 0.3


def test_a_lazy_answer_is_timed_until_its_bytes_arrive(served):
    """The deferral that got through: the work moved into the conversion of a lazy result, after the call."""
    lazy = """
        import time

        class Later:
            def __init__(self, x):
                self.x = x

            def __float__(self):
                time.sleep(0.5)
                return 2 * self.x

        def double(x):
            return Later(x)
    """
    run = run_with_calc(served, textwrap.dedent(lazy))

    assert run.final_score is not None, run.eval_error
    assert run.final_score >= 0.5
    assert run.succeeded is False


def test_the_submission_runs_where_no_hidden_file_is(served):
    """It looks for the hidden scripts and prepare.py's hidden output everywhere it can read, and answers with what
    it found (a wrong answer, which fails the run). The marker is split in its source, so it does not find itself."""
    snoop = f"""
        import os

        def found():
            for top in ("/", "/task", "/task/scripts", "/opt/mlab"):
                for folder, dirs, files in os.walk(top):
                    dirs[:] = [d for d in dirs if folder != "/" or d not in ("proc", "sys", "dev", "usr", "lib")]
                    for name in files:
                        try:
                            with open(os.path.join(folder, name), errors="ignore") as fh:
                                if "{MARKER[:6]}" + "{MARKER[6:]}" in fh.read(1_000_000):
                                    return os.path.join(folder, name)
                        except OSError:
                            pass
            return ""

        FOUND = found()

        def double(x):
            return FOUND if FOUND else 2 * x
    """
    run = run_with_calc(served, textwrap.dedent(snoop))

    assert run.final_score is not None, run.eval_error
    assert MARKER not in run.eval_error


def test_what_the_submission_prints_does_not_corrupt_its_answers(served):
    noisy = """
        import sys

        print("loading", "x" * 100_000)

        def double(x):
            print("computing", x, "y" * 100_000)
            sys.stdout.flush()
            return 2 * x
    """
    run = run_with_calc(served, textwrap.dedent(noisy))

    assert run.final_score is not None, run.eval_error
    assert run.succeeded is True


def test_a_submission_that_crashes_while_loading_is_the_runs_evaluation_error(served):
    run = run_with_calc(served, "raise RuntimeError('broken on import')\n")

    assert run.final_score is None
    assert "exited with 1 while loading" in run.eval_error, run.eval_error
    assert "broken on import" in run.eval_error


def test_a_submission_that_never_answers_is_cut_at_the_action_timeout(served, settings):
    settings.BENCH_ACTION_TIMEOUT_S = 3
    run = run_with_calc(served, "import time\n\ndef double(x):\n    time.sleep(600)\n")

    assert run.final_score is None
    assert "did not finish within 3 s (answering request 1 of 3)" in run.eval_error, run.eval_error


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"scripts/read_only_files.txt": ""}, "which is not read-only"),
        ({"env/serve.py": None}, "env/serve.py, which is not in the package"),
        ({"scripts/eval.py": "def make_requests(p):\n    return [b'1']\n"}, "does not define score_answers"),
        ({"task.toml": '[evaluation]\nserve = "../scripts/eval.py"\n'}, "must name a Python file of env/"),
    ],
)
def test_a_served_package_must_be_complete(tmp_path, change, message):
    files = {**SERVED_FILES, **{k: v for k, v in change.items() if v is not None}}
    drop = tuple(k for k, v in change.items() if v is None)
    if "task.toml" in change:
        files["scripts/read_only_files.txt"] = ""
    root = package_write(tmp_path / "bad", files, drop=drop)

    with pytest.raises(TaskPackageError, match=message):
        package_load(root)


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_serves_the_submission_its_requests(tmp_path, settings, backend):
    """The requests go in on the process's stdin and the answers come out of its stdout, through bwrap's pipes or
    the container's attach socket alike."""
    skip_unless_backend(backend)
    settings.BENCH_SANDBOX = backend
    settings.BENCH_TIMED_ROUNDS = 1
    version = served_task(tmp_path)

    run = run_with_calc(version, "def double(x):\n    return 2 * x\n")

    assert run.sandbox == backend
    assert run.final_score is not None, run.eval_error
    assert run.succeeded is True


def test_a_submission_cannot_fill_the_workers_disk_with_answers(served, settings, monkeypatch):
    """The submission shares its process with serve.py, so it can make any answer (here it swaps serve.py's answer()
    for one of 100 kB). Each answer is kept until it is scored: past the bound on all of them, the serving stops."""
    from runner.execution import serving

    monkeypatch.setattr(serving, "ANSWERS_LIMIT", 150_000)
    flood = """
        import sys

        def double(x):
            sys.modules["serve"].answer = lambda state, request: b"1" * 100_000
            return 2 * x
    """
    run = run_with_calc(served, textwrap.dedent(flood))

    assert run.final_score is None
    assert "answers of more than 150000 bytes in all" in run.eval_error, run.eval_error
