import io
import zipfile

import pytest
from django.core.management import CommandError, call_command

from runner.execution import run_execute
from runner.models import Agent, Step
from runner.services import run_create


@pytest.mark.django_db(transaction=True)
def test_the_example_agent_package_imports_and_runs_in_its_sandbox(settings, tiny_task, capsys):
    call_command("import_agent", str(settings.BASE_DIR / "docs" / "example-agent"))
    assert "example-agent@1: imported" in capsys.readouterr().out
    agent = Agent.objects.get(name="example-agent")
    assert agent.kind == "package" and not agent.is_trusted

    run = run_execute(run_create(task=tiny_task.task, agent=agent, enqueue=False).pk)

    assert run.status == "finished" and run.final_score == 2.0
    assert list(Step.objects.filter(run=run).values_list("action", flat=True)) == [
        "Read File", "Execute Script", "Final Answer",
    ]  # fmt: skip
    assert "train.py has 4 lines" in run.stderr_tail


@pytest.mark.django_db
def test_bad_agent_packages_are_refused_with_the_reason(tmp_path, settings):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("agent/agent.toml", 'name = "x"\nentrypoint = "missing_module"\n')
    (tmp_path / "a.zip").write_bytes(buffer.getvalue())
    with pytest.raises(CommandError, match="the entrypoint module missing_module is not in the package"):
        call_command("import_agent", str(tmp_path / "a.zip"))

    (tmp_path / "b").mkdir()
    with pytest.raises(CommandError, match="agent.toml is missing"):
        call_command("import_agent", str(tmp_path / "b"))

    call_command("import_agent", str(settings.BASE_DIR / "docs" / "example-agent"))
    changed = tmp_path / "changed"
    import shutil

    shutil.copytree(settings.BASE_DIR / "docs" / "example-agent", changed)
    (changed / "example_agent.py").write_text("# changed\n")
    with pytest.raises(CommandError, match="already exists with other files; give the package a new version"):
        call_command("import_agent", str(changed))


@pytest.mark.django_db
def test_a_package_cannot_take_the_name_of_a_builtin_agent(tmp_path):
    root = tmp_path / "impostor"
    root.mkdir()
    (root / "agent.toml").write_text('name = "baseline"\nversion = "2"\nentrypoint = "main"\n')
    (root / "main.py").write_text("print('not the baseline')\n")
    with pytest.raises(CommandError, match="the name 'baseline' belongs to a built-in agent"):
        call_command("import_agent", str(root))
    assert not Agent.objects.filter(name="baseline", version="2").exists()
