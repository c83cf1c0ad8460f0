from datetime import UTC, datetime

import pytest
from django.urls import reverse

from runner.models import Run
from tests.factories import RunFactory, StepFactory


@pytest.fixture
def finished_run(tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, final_score=2.5, steps_count=3)
    StepFactory(
        run=run,
        index=0,
        action="List Files",
        observation="train.py\ndata.txt\n",
        entries={"Thought": "look around first"},
    )
    StepFactory(
        run=run,
        index=1,
        action="Execute Script",
        action_input={"script_name": "train.py"},
        observation="The script has been executed. Here is the output:\ntraining\ndone\n",
    )
    StepFactory(
        run=run,
        index=2,
        action="Final Answer",
        action_input={"final_answer": "value is 2.5"},
        observation="end",
    )
    return run


def test_the_run_page_shows_every_step(client, finished_run):
    response = client.get(reverse("runner:run_detail", args=[finished_run.pk]))

    assert response.status_code == 200
    html = response.content.decode()
    for text in [
        "Step 0",
        "Step 1",
        "Step 2",
        "List Files",
        "Execute Script",
        "Final Answer",
        "look around first",
        "script_name: train.py",
        "training\ndone",
        "2.5000",
    ]:
        assert text in html, text
    assert 'hx-trigger="every 2s"' not in html  # a finished run does not poll


def test_a_live_run_polls_for_what_is_new_and_the_poll_is_a_fragment(client, tiny_task):
    run = RunFactory(
        task_version=tiny_task, status=Run.Status.RUNNING, live_action="Execute Script", live_output="epoch 1"
    )

    page = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    poll_url = f"{reverse('runner:run_poll', args=[run.pk])}?after=-1"
    fragment = client.get(poll_url, headers={"HX-Request": "true"}).content.decode()

    assert 'hx-trigger="every 2s"' in page
    assert f'hx-get="{poll_url}"' in page
    assert "epoch 1" in page and "epoch 1" in fragment
    assert fragment.lstrip().startswith('<div id="poller"')
    assert 'hx-trigger="every 2s"' in fragment
    assert "<html" not in fragment


def test_the_runs_list_links_to_each_run(client, finished_run):
    html = client.get(reverse("runner:run_list")).content.decode()
    assert f'href="{reverse("runner:run_detail", args=[finished_run.pk])}"' in html


def test_a_runs_table_row_links_its_run_and_task_and_shows_its_figures(client, tiny_task):
    run = RunFactory(task_version=tiny_task, final_score=1.234567, wall_seconds=61.27, steps_count=7)
    Run.objects.filter(pk=run.pk).update(created_at=datetime(2026, 3, 4, 5, 6, 59, tzinfo=UTC))
    RunFactory(task_version=tiny_task, status=Run.Status.FAILED, final_score=None)

    for url in (
        reverse("runner:run_list"),
        reverse("leaderboard:home"),
        reverse("leaderboard:task_detail", args=["tiny"]),
    ):
        html = client.get(url).content.decode()
        row = html[html.index(f'href="{reverse("runner:run_detail", args=[run.pk])}"') :].split("</tr>")[0]
        assert f'href="{reverse("leaderboard:task_detail", args=["tiny"])}">tiny</a>' in row, url
        assert ">1.2346<" in row and ">61.3 s<" in row and ">7<" in row and ">2026-03-04 05:06<" in row, url
        assert '<td class="num">—</td>' in html  # the failed run's missing score


def test_list_and_trace_pages_do_not_grow_queries_with_rows(client, tiny_task, django_assert_max_num_queries):
    runs = RunFactory.create_batch(5, task_version=tiny_task)
    for run in runs:
        StepFactory.create_batch(4, run=run)
    with django_assert_max_num_queries(4):
        client.get(reverse("runner:run_list"))
    with django_assert_max_num_queries(4):  # the run, its steps, its scored steps, its review tags
        client.get(reverse("runner:run_detail", args=[runs[0].pk]))
    with django_assert_max_num_queries(5):  # the ranking generation, the counts (once per generation), the rest
        client.get(reverse("leaderboard:home"))


def test_an_unknown_run_is_a_404(client, db):
    assert client.get(reverse("runner:run_detail", args=[999])).status_code == 404


def test_the_action_catalogue_page_lists_every_action_with_its_arguments(client, db):
    from runner.actions import ACTIONS

    html = client.get(reverse("runner:actions")).content.decode()
    for spec in ACTIONS:
        assert spec.name.replace("(", "").replace(")", "") in html.replace("(", "").replace(")", "")
        for arg in spec.usage:
            assert f"<code>{arg}</code>" in html


def test_an_improvement_just_under_the_threshold_does_not_read_as_the_threshold(client, tiny_task):
    run = RunFactory(task_version=tiny_task, improvement=0.0989, succeeded=False, final_score=1.0)

    for url in (reverse("runner:run_list"), reverse("runner:run_detail", args=[run.pk])):
        html = client.get(url).content.decode()
        assert "9.9%" in html and "10%<" not in html


def test_the_runs_list_says_when_filters_match_nothing_or_make_no_sense_and_pages_keep_them(client, tiny_task):
    runs = RunFactory.create_batch(51, task_version=tiny_task, status=Run.Status.FINISHED)
    url = reverse("runner:run_list")

    assert "No runs match these filters." in client.get(url + "?agent=nobody").content.decode()
    bogus = client.get(url + "?status=bogus").content.decode()
    assert "Unknown status bogus; expected one of queued" in bogus
    assert f'href="/runs/{runs[-1].pk}/"' in bogus  # the bad filter is dropped, not applied
    first = client.get(url + "?status=finished").content.decode()
    assert f"?status=finished&amp;before={runs[1].pk}" in first  # the older page, from the last run shown


def test_in_the_admin_a_runs_record_is_read_only_and_links_to_its_trace(admin_client, finished_run):
    url = reverse("admin:runner_run_change", args=[finished_run.pk])
    html = admin_client.get(url).content.decode()
    assert 'name="final_score"' not in html and 'name="succeeded"' not in html and 'name="status"' not in html
    assert f'href="/runs/{finished_run.pk}/"' in html
    assert admin_client.get(reverse("admin:runner_run_add")).status_code == 403
    admin_client.post(url, {"final_score": "99", "succeeded": "on", "status": "finished"})
    finished_run.refresh_from_db()
    assert finished_run.final_score != 99
    step = finished_run.steps.first()
    assert (
        'name="observation"'
        not in admin_client.get(reverse("admin:runner_step_change", args=[step.pk])).content.decode()
    )


def test_a_run_not_started_says_so_and_a_cancelled_one_is_not_an_error(client, tiny_task):
    queued = RunFactory(task_version=tiny_task, status=Run.Status.QUEUED)
    html = client.get(reverse("runner:run_detail", args=[queued.pk])).content.decode()
    assert "not started" in html and "waiting for a worker" in html and "peak memory" not in html

    cancelled = RunFactory(task_version=tiny_task, status=Run.Status.CANCELLED, error="cancelled before it started")
    html = client.get(reverse("runner:run_detail", args=[cancelled.pk])).content.decode()
    assert '<div class="note"><strong>Cancelled:</strong> cancelled before it started</div>' in html
    assert 'class="error"' not in html


def test_staff_can_score_every_step_of_an_ended_run_from_its_page(
    admin_client, client, tiny_task, django_capture_on_commit_callbacks
):
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED)
    for index, snapshot in enumerate(["a" * 64, "a" * 64, "b" * 64]):
        StepFactory(run=run, index=index, snapshot=snapshot)
    url = reverse("runner:run_detail", args=[run.pk])
    assert "Score every step" in admin_client.get(url).content.decode()
    assert "Score every step" not in client.get(url).content.decode()

    with django_capture_on_commit_callbacks(execute=False) as jobs:
        response = admin_client.post(reverse("runner:run_score_steps", args=[run.pk]), follow=True)
    assert len(jobs) == 2  # one evaluation per distinct workspace
    assert "Queued 2 evaluation job(s)" in response.content.decode()
    assert client.post(reverse("runner:run_score_steps", args=[run.pk])).status_code == 302  # to the login page


def test_a_long_run_has_an_index_to_jump_to_each_step(client, tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED)
    for index in range(5):
        StepFactory(run=run, index=index, action="List Files", is_error=index == 3)
    html = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    index_nav = html.split('<nav class="step-index"', 1)[1].split("</nav>", 1)[0]
    assert [f'href="#step-{i}"' in index_nav for i in range(5)] == [True] * 5
    assert 'class="err" title="List Files (error)">3</a>' in index_nav
    assert all(f'id="step-{i}"' in html for i in range(5))


@pytest.mark.django_db(transaction=True)
def test_with_the_queue_unreachable_run_again_and_score_steps_say_so_instead_of_failing(
    admin_client, tiny_task, broker_down
):
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED)
    StepFactory(run=run, index=0, snapshot="a" * 64)

    response = admin_client.post(reverse("runner:run_again", args=[run.pk]), follow=True)
    again = Run.objects.exclude(pk=run.pk).get()
    assert response.redirect_chain[-1][0] == reverse("runner:run_detail", args=[again.pk])
    assert f"run {again.pk} stays queued and will be sent when the queue is back" in response.content.decode()
    assert again.status == "queued" and again.sent_at is None

    response = admin_client.post(reverse("runner:run_score_steps", args=[run.pk]), follow=True)
    assert response.status_code == 200
    assert "Could not queue the evaluations: the job queue is unreachable" in response.content.decode()
