import pytest

from runner.actions import Environment
from runner.execution.sandboxes import get_sandbox
from runner.sandbox.identity import writable_for_sandbox


@pytest.fixture
def make_env(tmp_path):
    """An Environment on a fresh workspace, in the bwrap sandbox unless told otherwise; closed at the end of the
    test (its kept sandbox, REPL or containers ended)."""
    made: list[Environment] = []

    def make(files: dict[str, str] | None = None, *, sandbox: str = "bwrap", name="workspace", **kwargs) -> Environment:
        workspace = tmp_path / name
        workspace.mkdir(exist_ok=True)
        for rel, text in (files or {}).items():
            (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
            (workspace / rel).write_text(text)
        read_only = set(kwargs.get("read_only_files", []))
        for rel in read_only:
            (workspace / rel).chmod(0o444)
        box = get_sandbox(sandbox)
        writable_for_sandbox(workspace, box.ids, read_only=read_only)
        made.append(Environment(workspace=workspace, sandbox=box, python=box.python, **kwargs))
        return made[-1]

    yield make
    for env in made:
        env.close()
