"""Runs of one task side by side: headers, scores overlaid, steps aligned by index, final workspaces diffed."""

import pytest
from django.urls import reverse

from runner.models import Run, Step
from tests.factories import AgentFactory, RunFactory
from tests.runner.logs.test_trace_transcript import step

URL = reverse("runner:runs_compare")


@pytest.fixture
def two_runs(tiny_task):
    return two_runs_create(tiny_task)


def two_runs_create(tiny_task) -> tuple[Run, Run]:
    """Two runs of tiny: A changed lr in train.py and wrote notes.txt; B changed epochs. A ran 3 steps, B 2."""
    a = RunFactory(task_version=tiny_task, agent=AgentFactory(name="alpha"), steps_count=3, final_score=2.5)
    b = RunFactory(task_version=tiny_task, agent=AgentFactory(name="beta"), steps_count=2, final_score=1.5)
    base = {"train.py": b"lr = 0.1\nepochs = 5\n"}
    plan = "Research Plan and Status"
    step(a, 0, action="List Files", files=base, entries={plan: "1. read train.py"})
    step(a, 1, action="Edit Script (AI)", files={"train.py": b"lr = 0.01\nepochs = 5\n"})
    a_last = step(a, 2, action="Execute Script", files={"train.py": b"lr = 0.01\nepochs = 5\n", "notes.txt": b"x"})
    step(b, 0, action="Understand File", files=base, error=True)
    b_last = step(b, 1, action="Execute Script", files={"train.py": b"lr = 0.1\nepochs = 9\n"})
    Step.objects.filter(pk__in=[a_last.pk, b_last.pk]).update(score=2.0)
    Run.objects.filter(pk=a.pk).update(final_snapshot=a_last.snapshot)
    Run.objects.filter(pk=b.pk).update(final_snapshot=b_last.snapshot)
    return a, b


def test_two_runs_side_by_side_headers_steps_aligned_and_the_scripts_diff(client, two_runs):
    a, b = two_runs

    html = client.get(URL, {"runs": f"{a.pk},{b.pk}"}).content.decode()

    assert f"run #{a.pk}" in html and f"run #{b.pk}" in html and "alpha" in html and "beta" in html
    assert "2.5000" in html and "1.5000" in html
    steps = html.split('class="compare-steps"', 1)[1]
    row1 = steps.split("<strong>1</strong>", 1)[1].split("</tr>", 1)[0]
    assert "Edit Script (AI)" in row1 and "Execute Script" in row1  # index 1 of each run, side by side
    row2 = steps.split("<strong>2</strong>", 1)[1].split("</tr>", 1)[0]
    assert row2.count('<span class="muted">—</span>') == 1  # B has no step 2
    assert "1. read train.py" in steps  # A's plan at step 0
    diff = html.split('id="file-diff"', 1)[1]
    assert '<span class="diff-del">-epochs = 5</span>' in diff and '<span class="diff-add">+epochs = 9</span>' in diff
    assert '<span class="diff-del">-lr = 0.01</span>' in diff and '<span class="diff-add">+lr = 0.1</span>' in diff
    files = html.split('class="compare-files"', 1)[1].split("</table>", 1)[0]
    assert "notes.txt" in files and "removed" in files and "train.py" in files
    assert '"customdata"' in html and f"/runs/{b.pk}/#step-1" in html  # scores overlaid, points open steps


def test_another_file_of_the_final_workspaces_can_be_diffed(client, two_runs):
    a, b = two_runs

    html = client.get(URL, {"runs": f"{a.pk},{b.pk}", "file": "notes.txt"}).content.decode()

    assert '<span class="diff-del">-x</span>' in html.split('id="file-diff"', 1)[1]


def test_one_run_offers_the_other_runs_of_its_task_and_runs_of_different_tasks_are_refused(client, two_runs, tmp_path):
    a, b = two_runs
    from task_bank.services import task_import
    from tests.factories import TINY_FILES, package_write

    other_task, _ = task_import(root=package_write(tmp_path / "other", TINY_FILES), slug="other")
    elsewhere = RunFactory(task_version=other_task)

    pick = client.get(URL, {"runs": str(a.pk)}).content.decode()
    mixed = client.get(URL, {"runs": f"{a.pk},{elsewhere.pk}"})
    missing = client.get(URL, {"runs": f"{a.pk},999999"})
    garbage = client.get(URL, {"runs": "1,x"})
    too_many = client.get(
        URL, {"runs": ",".join(str(r.pk) for r in RunFactory.create_batch(5, task_version=a.task_version))}
    )

    assert f'value="{b.pk}"' in pick and f'value="{elsewhere.pk}"' not in pick
    assert mixed.status_code == 400 and "runs of one task can be compared" in mixed.content.decode()
    assert missing.status_code == 404 and "no run 999999" in missing.content.decode()
    assert garbage.status_code == 400
    assert too_many.status_code == 400 and "at most 4 runs" in too_many.content.decode()


def test_a_private_agents_run_cannot_be_compared_by_others(viewer, private_run, tiny_task):
    public = RunFactory(task_version=tiny_task)

    response = viewer.client.get(URL, {"runs": f"{public.pk},{private_run.pk}"})

    assert response.status_code == (200 if viewer.may_see else 404)
