"""Test data: task packages written to folders, and factories for the models."""

from __future__ import annotations

import textwrap
from pathlib import Path

import factory

TINY_FILES = {
    "task.toml": """
        title = "Tiny"
        category = "canonical"
        [metric]
        name = "value"
        higher_is_better = true
        [limits]
        max_steps = 10
        max_time_s = 120
    """,
    "scripts/research_problem.txt": "Make value.txt hold a larger number than train.py writes.",
    "scripts/read_only_files.txt": "data.txt\n",
    "scripts/prepare.py": """
        with open("../env/data.txt", "w") as fh:
            fh.write("shared data\\n")
        with open("answer.txt", "w") as fh:
            fh.write("hidden\\n")
    """,
    "scripts/eval.py": """
        import os

        def get_score(submission_folder="../env"):
            with open(os.path.join(submission_folder, "value.txt")) as fh:
                return float(fh.read())
    """,
    "env/train.py": """
        print("training")
        with open("value.txt", "w") as fh:
            fh.write("2.0")
        print("done")
    """,
}


def package_write(root: Path, files: dict[str, str] | None = None, *, drop: tuple[str, ...] = ()) -> Path:
    """Write a task package folder from {relative path: text}; ``drop`` leaves files out."""
    for rel, text in (files or TINY_FILES).items():
        if rel in drop:
            continue
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "runner.Agent"

    name = factory.Sequence(lambda n: f"agent-{n}")
    version = "1"
    kind = "package"
    entrypoint = "scripted_agent"
    package_path = str(Path(__file__).parent / "agents")


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "runner.Run"

    task = factory.LazyAttribute(lambda o: o.task_version.task)
    agent = factory.SubFactory(AgentFactory)
    status = "finished"


class StepFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "runner.Step"

    index = factory.Sequence(lambda n: n)
    action = "List Files"
    action_input = factory.LazyFunction(lambda: {"dir_path": "."})
    observation = "train.py\n"
    started_at = factory.LazyFunction(lambda: __import__("django.utils.timezone").utils.timezone.now())


def validate_now(version) -> None:
    """Validate a task version here and now: every baseline run of its round, in this process."""
    from runner.execution import run_execute
    from runner.execution.validation import task_version_validate_queue

    for run in task_version_validate_queue(version=version, enqueue=False):
        run_execute(run.pk)
