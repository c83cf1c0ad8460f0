"""The trace viewer's depth: plan updates highlighted, workspace changes and files after each step."""

import pytest
from django.urls import reverse

from runner.execution import run_execute
from runner.services import run_create
from tests.factories import AgentFactory


def act(action: str, entries: dict | None = None, **args) -> dict:
    return {"type": "act", "action": action, "input": args, "entries": entries or {}}


@pytest.fixture
def run(tiny_task, transactional_db):
    script = [
        act("List Files", {"Research Plan and Status": "1. look around\n2. write a value"}, dir_path="."),
        act(
            "Write File",
            {"Research Plan and Status": "1. look around (done)\n2. **write a value**"},
            file_name="value.txt",
            content="4\n",
        ),
        act("Write File", {"Thought": "<script>alert(1)</script>"}, file_name="value.txt", content="5\n"),
        act("Final Answer", final_answer="done"),
    ]
    return run_execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)


def test_plan_updates_are_highlighted_and_entries_escaped(client, run):
    html = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    assert "<mark>write a value</mark>" in html
    # Each changed line is its own block, with no newline after it (a <pre> would show an empty line).
    changed = '<span class="changed-line">1. look around (done)</span><span class="changed-line">2. <mark'
    assert changed in html
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_workspace_changes_show_added_files_and_diffs(client, run):
    added = client.get(reverse("runner:step_changes", args=[run.pk, 1])).content.decode()
    assert "added" in added and "value.txt" in added and "+4" in added
    changed = client.get(reverse("runner:step_changes", args=[run.pk, 2])).content.decode()
    assert "-4" in changed and "+5" in changed
    nothing = client.get(reverse("runner:step_changes", args=[run.pk, 0])).content.decode()
    assert "did not change the workspace" in nothing


def test_the_file_browser_shows_the_workspace_as_it_was_after_each_step(client, run):
    url = reverse("runner:step_files", args=[run.pk, 1])
    listing = client.get(url).content.decode()
    assert "value.txt" in listing and "train.py" in listing and "data.txt" in listing
    assert "4" in client.get(url, {"path": "value.txt"}).content.decode()
    assert "5" in client.get(reverse("runner:step_files", args=[run.pk, 2]), {"path": "value.txt"}).content.decode()
    before = client.get(reverse("runner:step_files", args=[run.pk, 0]), {"path": "value.txt"})
    assert before.status_code == 404  # value.txt did not exist yet after step 0


def test_the_trace_page_query_count_does_not_grow_with_steps(client, run, django_assert_max_num_queries):
    with django_assert_max_num_queries(4):  # the run, its steps, its scored steps, its review tags
        client.get(reverse("runner:run_detail", args=[run.pk]))


def test_staff_can_cancel_run_again_and_fork_from_the_run_page(admin_client, client, run):
    page = admin_client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    assert "fork from here" in page and "Run again" in page
    assert "fork from here" not in client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()

    forked = admin_client.post(reverse("runner:run_fork", args=[run.pk, 1]))
    fork = run.forks.get()
    assert forked.url == reverse("runner:run_detail", args=[fork.pk])
    assert fork.fork_step == 1 and fork.steps_count == 2 and fork.status == "queued"

    again = admin_client.post(reverse("runner:run_again", args=[run.pk]))
    assert again.status_code == 302
    cancel = admin_client.post(reverse("runner:run_cancel", args=[fork.pk]), follow=True)
    fork.refresh_from_db()
    assert fork.status == "cancelled" and "cancel requested" in cancel.content.decode()

    assert client.post(reverse("runner:run_cancel", args=[run.pk])).status_code == 302  # to the login page
    assert admin_client.get(reverse("runner:run_cancel", args=[run.pk])).status_code == 405
