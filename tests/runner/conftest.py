import pytest

from runner.actions import Environment
from runner.sandbox import get_sandbox, sandbox_python


@pytest.fixture
def make_env(tmp_path):
    """An Environment on a fresh workspace, in the bwrap sandbox unless told otherwise."""

    def make(files: dict[str, str] | None = None, *, sandbox: str = "bwrap", **kwargs) -> Environment:
        workspace = tmp_path / "workspace"
        workspace.mkdir(exist_ok=True)
        for rel, text in (files or {}).items():
            (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
            (workspace / rel).write_text(text)
        return Environment(workspace=workspace, sandbox=get_sandbox(sandbox), python=sandbox_python(), **kwargs)

    return make
