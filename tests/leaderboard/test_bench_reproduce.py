"""``manage.py bench_reproduce``: a row or a run re-run from the command line, or the refusal as the error."""

import json

import pytest
from django.core.management import CommandError, call_command

from runner.models import ModelEndpoint, Run
from tests.factories import AgentFactory, RunFactory


@pytest.fixture
def row(tiny_task_ready, people, settings):
    ModelEndpoint.objects.create(name="m", base_url="http://127.0.0.1:9/v1", model_id="m-1")
    agent = AgentFactory(name="solver")
    return [
        RunFactory(task_version=tiny_task_ready, agent=agent, model="m", succeeded=True, sandbox=settings.BENCH_SANDBOX)
        for _ in range(2)
    ]


def test_it_reproduces_a_row_as_staff_and_prints_what_it_queued(row, people, capsys):
    call_command("bench_reproduce", "--row", "solver@1/m", "--user", "curator")

    line = json.loads(capsys.readouterr().out)
    assert line["exact"] and line["runs"] == 2 and line["state"] == "approved"
    assert Run.objects.filter(batch_id=line["batch"], purpose=Run.Purpose.REPRODUCTION).count() == 2


def test_a_refusal_is_the_commands_error(row, people):
    ModelEndpoint.objects.filter(name="m").update(is_enabled=False)

    with pytest.raises(CommandError, match="model endpoint m is disabled"):
        call_command("bench_reproduce", "--run", str(row[0].pk), "--user", "curator")
    with pytest.raises(CommandError, match="no active staff account stranger"):
        call_command("bench_reproduce", "--row", "solver@1/m", "--user", "stranger")
