"""The evaluation harness (runner/harness/score.py): what it reports for what eval.py does, run as a program
the way the sandbox runs it; then through evaluate() in each way a backend hands back the result."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from runner.execution.evaluation import HARNESS_DIR, evaluate, result_parse
from runner.execution.preparation import task_version_prepare
from runner.execution.sandboxes import get_sandbox, sandbox_config
from runner.sandbox.bwrap import BwrapSandbox
from runner.workspace.snapshots import BlobStore

GOOD = """
import os

def get_score(submission_folder):
    with open(os.path.join(submission_folder, "value.txt")) as fh:
        return float(fh.read())
"""


def harness_output(tmp_path, eval_source: str, *, channel: str = "pipe", neighbours: dict | None = None) -> bytes:
    """Run score.py on a submission holding value.txt = 0.75, eval.py and its neighbours in the scripts
    folder; the raw bytes it reported.

    -S and a bare environment: no site-packages, so neither Django nor the project could be imported."""
    scripts, submission = tmp_path / "scripts", tmp_path / "env"
    scripts.mkdir()
    submission.mkdir()
    for name, text in {"eval.py": textwrap.dedent(eval_source), **(neighbours or {})}.items():
        (scripts / name).write_text(text)
    (submission / "value.txt").write_text("0.75")
    argv = [sys.executable, "-S", str(HARNESS_DIR / "score.py"), str(scripts), str(submission)]
    options = {"cwd": scripts, "env": {"PATH": os.environ["PATH"]}, "capture_output": True, "timeout": 60}
    if channel == "folder":
        (tmp_path / "out").mkdir()
        subprocess.run([*argv, str(tmp_path / "out")], **options)
        return (tmp_path / "out" / "result.json").read_bytes()
    read_end, write_end = os.pipe()
    try:
        subprocess.run([*argv, str(write_end)], pass_fds=(write_end,), **options)
    finally:
        os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        return fh.read()


def harness_result(tmp_path, eval_source: str, **kwargs) -> dict:
    return json.loads(harness_output(tmp_path, eval_source, **kwargs))


@pytest.mark.parametrize("channel", ["pipe", "folder"])
def test_a_number_is_the_score(tmp_path, channel):
    assert harness_result(tmp_path, GOOD, channel=channel) == {"score": 0.75}


def test_an_eval_without_get_score_is_an_error(tmp_path):
    result = harness_result(tmp_path, "def score(submission_folder):\n    return 1.0\n")
    assert result == {"error": "eval.py has no get_score(submission_folder) function"}


@pytest.mark.parametrize(
    ("returned", "error"),
    [
        ("'0.5'", "get_score returned str '0.5'; expected a number"),
        ("b'0.5'", "get_score returned bytes b'0.5'; expected a number"),
        ("True", "get_score returned bool True; expected a number"),
        ("None", "get_score returned NoneType None; expected a number"),
        ("'x' * 1000", "get_score returned str '" + "x" * 199 + "; expected a number"),
        ("float('nan')", "get_score returned nan; expected a finite number"),
        ("float('-inf')", "get_score returned -inf; expected a finite number"),
    ],
)
def test_text_booleans_and_non_finite_numbers_are_not_scores(tmp_path, returned, error):
    assert harness_result(tmp_path, f"def get_score(submission_folder):\n    return {returned}\n") == {"error": error}


def test_a_number_like_object_is_a_score(tmp_path):
    source = "import fractions\n\ndef get_score(submission_folder):\n    return fractions.Fraction(3, 4)\n"
    assert harness_result(tmp_path, source) == {"score": 0.75}


@pytest.mark.parametrize(
    ("body", "last_line"),
    [
        ("raise RuntimeError('answers do not match')", "RuntimeError: answers do not match"),
        ("raise SystemExit('eval.py gave up')", "SystemExit: eval.py gave up"),
    ],
)
def test_an_exception_is_an_error_with_its_traceback(tmp_path, body, last_line):
    error = harness_result(tmp_path, f"def get_score(submission_folder):\n    {body}\n")["error"]
    assert error.startswith("get_score raised:\nTraceback (most recent call last):\n")
    assert 'scripts/eval.py", line 2, in get_score' in error
    assert error.endswith(last_line + "\n")


def test_an_integer_too_large_for_a_float_is_an_error(tmp_path):
    error = harness_result(tmp_path, "def get_score(submission_folder):\n    return 10 ** 400\n")["error"]
    assert error.startswith("get_score raised:\n")
    assert error.endswith("OverflowError: int too large to convert to float\n")


def test_an_error_at_import_is_reported_the_same_way(tmp_path):
    error = harness_result(tmp_path, "import missing_module\n")["error"]
    assert error.startswith("get_score raised:\n")
    assert error.endswith("ModuleNotFoundError: No module named 'missing_module'\n")


def test_a_long_traceback_keeps_its_last_6000_characters(tmp_path):
    error = harness_result(tmp_path, "def get_score(submission_folder):\n    raise ValueError('v' * 10000)\n")["error"]
    assert error == "get_score raised:\n" + "v" * 5999 + "\n"


def test_the_result_is_cut_at_60000_bytes(tmp_path):
    # Each of these characters takes 12 bytes in JSON: the last 6000 of the traceback take more than 60000.
    data = harness_output(tmp_path, "def get_score(submission_folder):\n    raise ValueError('\\U0001f4a5' * 6000)\n")
    assert len(data) == 60000
    assert result_parse(data) == (None, "the evaluation did not report a result")


def test_eval_imports_its_neighbours_not_the_harness_and_is_the_module_eval(tmp_path):
    source = """
    import importlib.util, sys
    from answers import EXPECTED

    def get_score(submission_folder):
        harness_visible = importlib.util.find_spec("score") is not None
        return EXPECTED if sys.modules["eval"].get_score is get_score and not harness_visible else -1
    """
    assert harness_result(tmp_path, source, neighbours={"answers.py": "EXPECTED = 0.5\n"}) == {"score": 0.5}


def test_the_harness_is_undumpable_before_eval_is_imported(tmp_path):
    # PR_GET_DUMPABLE (3), asked while eval.py is imported: 0 means no process of the same user may read the
    # harness's memory or open its descriptors through /proc.
    source = "import ctypes\nDUMPABLE = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)\n\ndef get_score(folder):\n"
    source += "    return DUMPABLE\n"
    assert harness_result(tmp_path, source) == {"score": 0.0}


def test_a_process_started_by_eval_cannot_write_the_result(tmp_path):
    source = """
    import subprocess, sys

    FORGE = "import os, sys; os.write(int(sys.argv[1]), b'{\\"score\\": 1e9}')"

    def get_score(submission_folder):
        child = subprocess.run([sys.executable, "-c", FORGE, sys.argv[3]], close_fds=False, capture_output=True)
        return child.returncode
    """
    assert harness_output(tmp_path, source) == b'{"score": 1.0}'


class BwrapWithoutDescriptors(BwrapSandbox):
    """bwrap that hands back results the way the docker backend must: through a mounted folder."""

    passes_fds = False


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
@pytest.mark.parametrize("backend", ["bwrap", "bwrap without descriptors", "local"])
@pytest.mark.django_db
def test_evaluate_runs_the_harness_in_each_backend(tiny_task, tmp_path, backend):
    if backend == "bwrap without descriptors":
        config = sandbox_config()
        sandbox = BwrapWithoutDescriptors(config.interpreter, ids=config.ids)
    else:
        sandbox = get_sandbox(backend)
    prepared = task_version_prepare(tiny_task, sandbox=get_sandbox("bwrap"))
    (tmp_path / "value.txt").write_text("4.5")
    manifest = dict(prepared.env_manifest, **{"value.txt": list(BlobStore().put_file(tmp_path / "value.txt"))})

    result = evaluate(prepared, manifest, sandbox=sandbox)

    assert (result.score, result.error) == (4.5, "")
