"""Hidden task text never reaches a page anyone may read, whatever a submission the evaluation runs prints."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from runner.execution import run_execute
from runner.services import run_create
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, package_write, validate_now

SECRET = "SECRET-ANSWER-42"

# An eval.py that, like a timed or inference task's, imports the submission and calls it.
IMPORTING_FILES = {
    **TINY_FILES,
    "scripts/prepare.py": f"""
        with open("../env/data.txt", "w") as fh:
            fh.write("shared data\\n")
        with open("answer.txt", "w") as fh:
            fh.write("{SECRET}\\n")
    """,
    "scripts/eval.py": """
        import importlib.util
        import os

        def get_score(submission_folder="../env"):
            spec = importlib.util.spec_from_file_location("solution", os.path.join(submission_folder, "solution.py"))
            solution = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(solution)
            return float(solution.value())
    """,
    "env/solution.py": """
        def value():
            return 2.0
    """,
}

# The submission: it finds the hidden answer file beside the evaluation and raises with its text, and with an
# exception class named after it.
LEAKING = """
import glob

def value():
    found = glob.glob("/task/**/answer.txt", recursive=True) + glob.glob("../**/answer.txt", recursive=True)
    text = open(found[0]).read().strip() if found else "not found"
    leak = type(text.replace("-", "_"), (Exception,), {})
    raise leak("LEAK:" + text)
"""


@pytest.mark.django_db(transaction=True)
def test_an_evaluation_error_shows_anyone_what_failed_never_what_the_submission_printed(client, tmp_path):
    version, _ = task_import(root=package_write(tmp_path / "importing", IMPORTING_FILES), slug="importing")
    validate_now(version)
    script = [
        {"type": "act", "action": "Write File", "input": {"file_name": "solution.py", "content": LEAKING}},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]
    run = run_execute(run_create(task=version.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)
    assert run.final_score is None and SECRET in run.eval_error  # the leak happened: staff can see it

    public = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    assert SECRET not in public and SECRET.replace("-", "_") not in public
    assert "get_score raised: an exception of its own" in public
    assert SECRET not in client.get(reverse("runner:run_trace_json", args=[run.pk])).content.decode()
    assert SECRET not in client.get(f"/api/v1/runs/{run.pk}/").content.decode()

    staff = get_user_model().objects.create_user("staff", password="x", is_staff=True)
    client.force_login(staff)
    assert SECRET in client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
