"""The transcript's reading tools on the server: steps filtered by text, errors and action (each compared with
the step before it in the run, matching or not), coloured diffs, data files summarised, every file and the
whole workspace downloadable at every step, and the score chart's lines and links."""

import io
import re
import threading
import time
import zipfile

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from runner.charts import score_over_steps_figure
from runner.execution import run_execute
from runner.models import Run, Step
from runner.selectors import TRACE_PAGE_STEPS
from runner.services import run_create
from runner.workspace.snapshots import BlobStore
from task_bank.models import TaskVersion
from task_bank.services import task_import
from tests.factories import TINY_FILES, RunFactory, package_write


def step(run: Run, index: int, *, action="Execute Script", observation="", entries=None, error=False, files=None):
    """A recorded step whose workspace after it holds ``files`` ({path: bytes})."""
    store = BlobStore()
    manifest = {path: [store.put_bytes(data), len(data)] for path, data in (files or {}).items()}
    return Step.objects.create(
        run=run,
        index=index,
        action=action,
        action_input={"script_name": f"train_{index}.py"},
        observation=observation,
        entries=entries or {},
        is_error=error,
        started_at=timezone.now(),
        snapshot=store.manifest_save(manifest),
    )


@pytest.fixture
def long_run(tiny_task):
    """120 steps: step 77 alone says "divergence" (in its observation), step 90 in its Thought; every tenth step
    is an error; each step writes its own file, so every step changes the workspace."""
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, steps_count=120)
    files = {}
    for i in range(120):
        files = {**files, f"out_{i}.txt": f"step {i}\n".encode()}
        observation = "the loss shows DIVERGENCE at epoch 3" if i == 77 else f"epoch {i} done"
        entries = {"Thought": "watch for divergence"} if i == 90 else {"Thought": f"try idea {i}"}
        step(run, i, observation=observation, entries=entries, error=i % 10 == 9, files=files)
    return run


def cards(html: str) -> list[int]:
    """The indexes of the step cards a page shows, in order."""
    return [int(index) for index in re.findall(r'<li class="step[^"]*" id="step-(\d+)"', html)]


def test_a_text_search_finds_steps_anywhere_in_the_run_by_observation_entries_and_input(client, long_run):
    url = reverse("runner:run_detail", args=[long_run.pk])

    found = client.get(url, {"q": "divergence"}).content.decode()
    by_input = client.get(url, {"q": "TRAIN_33.PY"}).content.decode()

    assert cards(found) == [77, 90]  # any case, in observations and entries, far before the last page of steps
    assert "2 of 120 steps match" in found
    assert 'data-highlight="divergence"' in found
    assert cards(by_input) == [33]


def test_errors_only_and_one_action_filter_the_steps_and_page_them_with_the_filter_kept(client, long_run):
    Step.objects.filter(run=long_run, index=5).update(action="List Files")
    url = reverse("runner:run_detail", args=[long_run.pk])

    errors = client.get(url, {"errors": "1"}).content.decode()
    listed = client.get(url, {"action": "List Files"}).content.decode()
    both = client.get(url, {"action": "List Files", "errors": "1"}).content.decode()

    assert cards(errors) == list(range(9, 120, 10))
    assert cards(listed) == [5] and "1 of 120 steps match" in listed
    assert cards(both) == []


def test_a_filtered_page_of_more_than_a_page_of_matches_loads_the_earlier_matches_with_the_same_filter(
    client, long_run
):
    Step.objects.filter(run=long_run, index__lt=110).update(observation="the same words in each")
    url = reverse("runner:run_detail", args=[long_run.pk])
    first, second = 110 - TRACE_PAGE_STEPS, 110 - 2 * TRACE_PAGE_STEPS  # where the last and the page before start

    page = client.get(url, {"q": "same words"}).content.decode()
    earlier_url = reverse("runner:run_steps", args=[long_run.pk]) + f"?before={first}&q=same+words"
    earlier = client.get(earlier_url).content.decode()

    assert cards(page) == list(range(first, 110))
    assert f'href="{earlier_url}"' in page.replace("&amp;", "&")
    assert cards(earlier) == list(range(second, first))
    assert f"?before={second}&q=same+words" in earlier.replace("&amp;", "&")


def test_a_matching_step_is_compared_with_the_step_before_it_in_the_run_not_the_match_before(client, tiny_task):
    """Step 3 matches, steps 1 and 2 do not: its card says whether it changed what step 2 left, and which plan
    lines are new since the plan step 2 (or the last step before that wrote one) left."""
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, steps_count=4)
    plan = "Research Plan and Status"
    step(run, 0, observation="needle", entries={plan: "1. look"}, files={"a.txt": b"a"})
    step(run, 1, entries={plan: "1. look\n2. train"}, files={"a.txt": b"a", "b.txt": b"b"})
    step(run, 2, files={"a.txt": b"a", "b.txt": b"b"})
    step(
        run, 3, observation="needle", entries={plan: "1. look\n2. train\n3. tune"}, files={"a.txt": b"a", "b.txt": b"b"}
    )

    html = client.get(reverse("runner:run_detail", args=[run.pk]), {"q": "needle"}).content.decode()

    assert cards(html) == [0, 3]
    step3 = html.split('id="step-3"', 1)[1]
    assert "Workspace changes" not in step3  # step 3 left what step 2 left (against step 0, it would differ)
    assert '<span class="changed-line">3. tune</span>' in step3 and 'changed-line">2. train' not in step3


def test_a_live_poll_with_a_filter_adds_only_new_matching_steps(client, tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.RUNNING, steps_count=3)
    for i in range(3):
        step(run, i, observation="needle" if i != 1 else "hay")

    poll = client.get(reverse("runner:run_poll", args=[run.pk]), {"after": "-1", "q": "needle"})

    html = poll.content.decode()
    assert cards(html) == [0, 2]
    assert "?after=2&q=needle" in html.replace("&amp;", "&")


def test_diffs_are_coloured_line_by_line(client, tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, steps_count=2)
    step(run, 0, files={"train.py": b"lr = 0.1\nepochs = 5\n"})
    step(run, 1, files={"train.py": b"lr = 0.01\nepochs = 5\n"})

    html = client.get(reverse("runner:step_changes", args=[run.pk, 1])).content.decode()

    assert '<span class="diff-del">-lr = 0.1</span>' in html
    assert '<span class="diff-add">+lr = 0.01</span>' in html
    assert '<span class="diff-ctx"> epochs = 5</span>' in html
    assert '<span class="diff-hunk">@@' in html


def test_a_new_csv_is_summarised_by_its_shape_and_first_rows_not_dumped_line_by_line(client, tiny_task):
    rows = "id,feature,label\n" + "".join(f"{i},{i * 0.5},{i % 2}\n" for i in range(800))
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, steps_count=2)
    step(run, 0, files={"submission.csv": b"id,feature,label\n0,0,0\n"})
    step(run, 1, files={"submission.csv": rows.encode(), "new.csv": rows.encode()})

    html = client.get(reverse("runner:step_changes", args=[run.pk, 1])).content.decode()

    assert "800 rows × 3 columns; the first rows" in html  # the new file
    assert "1 row × 3 columns → 800 rows × 3 columns" in html  # the changed one: its shape before and after
    assert "<th>feature</th>" in html and "<td>4</td>" in html
    assert "799,399.5,1" not in html  # not the whole file


def test_a_binary_file_shows_its_size_and_digest_and_every_file_downloads_at_every_step(client, tiny_task):
    weights = bytes(range(256)) * 40
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, steps_count=2)
    step(run, 0, files={"model.bin": b"\0old"})
    step(run, 1, files={"model.bin": weights, "bad\udcffname.txt": b"odd name"})
    files_url = reverse("runner:step_files", args=[run.pk, 1])

    changes = client.get(reverse("runner:step_changes", args=[run.pk, 1])).content.decode()
    download = client.get(files_url, {"path": "model.bin", "download": "1"})
    escaped = client.get(files_url, {"path": "bad\\xffname.txt", "download": "1"})
    earlier = client.get(reverse("runner:step_files", args=[run.pk, 0]), {"path": "model.bin", "download": "1"})
    missing = client.get(files_url, {"path": "nothing.bin", "download": "1"})

    assert f"binary or large ({len(weights)} bytes)" in changes
    assert BlobStore().put_bytes(weights)[:16] in changes
    assert download["Content-Disposition"] == 'attachment; filename="model.bin"'
    assert b"".join(download.streaming_content) == weights
    assert b"".join(escaped.streaming_content) == b"odd name"
    assert b"".join(earlier.streaming_content) == b"\0old"
    assert missing.status_code == 404


def test_the_whole_workspace_after_a_step_downloads_as_a_zip_unless_it_is_over_the_limit(client, tiny_task, settings):
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, steps_count=1)
    big = b"x" * (3 << 20)
    notes = b"epoch done\n" * 100  # small and compressible: stored packed
    files = {"train.py": b"print(1)\n", "data/big.bin": big, "bad\udcffname.txt": b"odd", "notes.txt": notes}
    step(run, 0, files=files)
    url = reverse("runner:step_workspace_zip", args=[run.pk, 0])

    response = client.get(url)
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    settings.BENCH_WORKSPACE_ZIP_MAX_MB = 2
    refused = client.get(url)

    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}-step-0-workspace.zip"'
    assert sorted(archive.namelist()) == ["bad\\xffname.txt", "data/big.bin", "notes.txt", "train.py"]
    assert archive.read("data/big.bin") == big and archive.read("train.py") == b"print(1)\n"
    assert archive.read("notes.txt") == notes
    assert refused.status_code == 413 and "BENCH_WORKSPACE_ZIP_MAX_MB" in refused.content.decode()


def test_a_private_agents_step_downloads_are_a_404_to_anyone_but_its_owner_and_staff(viewer, private_run):
    files = viewer.client.get(
        reverse("runner:step_files", args=[private_run.pk, 0]), {"path": "notes.txt", "download": "1"}
    )
    archive = viewer.client.get(reverse("runner:step_workspace_zip", args=[private_run.pk, 0]))

    assert files.status_code == archive.status_code == (200 if viewer.may_see else 404)


def test_the_score_chart_draws_the_success_line_in_the_metrics_direction_and_links_each_point_to_its_step():
    scores = [{"index": 2, "score": 0.5}, {"index": 5, "score": 0.7}]

    higher = score_over_steps_figure(scores, baseline=0.5, metric="accuracy", threshold=0.1, higher_is_better=True)
    lower = score_over_steps_figure(scores, baseline=2.0, metric="mae", threshold=0.1, higher_is_better=False)

    assert [shape["y0"] for shape in higher["layout"]["shapes"]] == [0.5, pytest.approx(0.55)]
    assert [shape["y0"] for shape in lower["layout"]["shapes"]] == [2.0, pytest.approx(1.8)]
    assert higher["layout"]["annotations"][1]["text"] == "success (10% better)"
    assert higher["data"][0]["customdata"] == [["step 2", "#step-2"], ["step 5", "#step-5"]]


# -- a live run says what it is doing -------------------------------------------------------------------------

SLOW_PREPARE = """
import time
print("building the data: shard 1 of 3", flush=True)
time.sleep(8)
"""


@pytest.mark.django_db(transaction=True)
def test_a_preparing_run_shows_what_it_prepares_and_its_output_and_an_ended_one_its_time(
    client, tmp_path, baseline_agent
):
    """prepare.py prints a line and takes 8 s more: meanwhile the run's page says it is preparing the task,
    with that line; then the run goes on and ends."""
    files = {**TINY_FILES, "scripts/prepare.py": SLOW_PREPARE}
    version, _ = task_import(root=package_write(tmp_path / "slow", files), slug="slow-prepare")
    TaskVersion.objects.filter(pk=version.pk).update(status=TaskVersion.Status.READY, baseline_score=1.0)
    run = run_create(task=version.task, agent=baseline_agent, enqueue=False)

    def execute() -> None:
        try:
            run_execute(run.pk)
        finally:
            connection.close()

    worker = threading.Thread(target=execute)
    worker.start()
    try:
        page = ""
        for _ in range(600):  # until the line shows, or a minute has gone
            page = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
            if "shard 1 of 3" in page:
                break
            time.sleep(0.1)
        assert '<span class="index">Preparing</span>' in page
        assert "preparing the task (its prepare.py runs once per task version" in page
        assert "building the data: shard 1 of 3" in page
    finally:
        worker.join(timeout=300)
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED, run.error
    assert run.elapsed_seconds == run.wall_seconds > 0
