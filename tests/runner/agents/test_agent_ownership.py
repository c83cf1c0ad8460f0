"""Who an agent belongs to and who started a batch are recorded where they are known: import_agent --owner
(and --private), and the user whose API request queued the runs."""

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from runner.models import Agent, Batch


def test_import_agent_records_the_owner_and_a_private_agent_stays_private(settings, people, capsys):
    call_command("import_agent", str(settings.BASE_DIR / "docs" / "example-agent"), "--owner", "owner", "--private")

    agent = Agent.objects.get(name="example-agent")
    assert agent.owner == people["owner"] and agent.visibility == Agent.Visibility.PRIVATE
    assert "example-agent@1: imported (private, owned by owner)" in capsys.readouterr().out


def test_an_imported_agent_is_public_and_has_no_owner_unless_told(settings, db, capsys):
    call_command("import_agent", str(settings.BASE_DIR / "docs" / "example-agent"))

    agent = Agent.objects.get(name="example-agent")
    assert agent.owner is None and agent.visibility == Agent.Visibility.PUBLIC
    assert "imported (public, no owner)" in capsys.readouterr().out


def test_import_agent_refuses_an_unknown_owner_and_imports_nothing(settings, people):
    with pytest.raises(CommandError, match="no user named 'nobody': --owner takes the username of an existing"):
        call_command("import_agent", str(settings.BASE_DIR / "docs" / "example-agent"), "--owner", "nobody")
    assert not Agent.objects.filter(name="example-agent").exists()


def test_reimporting_the_same_files_says_that_owner_and_visibility_do_not_change(settings, people, capsys):
    path = str(settings.BASE_DIR / "docs" / "example-agent")
    call_command("import_agent", path)
    call_command("import_agent", path, "--owner", "owner", "--private")

    agent = Agent.objects.get(name="example-agent")
    assert agent.owner is None and agent.visibility == Agent.Visibility.PUBLIC
    assert "its owner and visibility stay as they were: change them in the admin" in capsys.readouterr().out


def test_runs_queued_through_the_api_record_who_asked_for_them(tiny_task, people, baseline_agent):
    api = APIClient()
    api.force_authenticate(people["staff"])

    created = api.post("/api/v1/runs/", {"agent": "baseline", "tasks": ["tiny"]}, format="json")

    assert created.status_code == 201
    assert Batch.objects.get(pk=created.json()[0]["batch"]).created_by == people["staff"]


def test_the_admin_lists_each_agents_owner_and_each_batchs_creator(admin_client, private_agent, people):
    Batch.objects.create(agent=private_agent, created_by=people["staff"])

    agents = admin_client.get(reverse("admin:runner_agent_changelist")).content.decode()
    batches = admin_client.get(reverse("admin:runner_batch_changelist")).content.decode()

    assert '<td class="field-owner nowrap">owner</td>' in agents
    assert '<td class="field-created_by nowrap">curator</td>' in batches
