"""Review tags: failure modes the trace itself shows, tagged when a run ends; reviewers' tags on runs and steps;
the runs list filtered by a tag."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from core.roles import REVIEWER_GROUP
from runner.execution import run_execute
from runner.models import LLMCall, ReviewTag, Run, RunLimits, Step
from runner.review import tags_auto
from runner.services import run_create
from tests.factories import AgentFactory, RunFactory


def act(action: str, **args) -> dict:
    return {"type": "act", "action": action, "input": args}


def kinds(run: Run) -> list[tuple[int, str]]:
    tags = ReviewTag.objects.filter(run=run).select_related("step")
    return sorted(((tag.step.index if tag.step_id else -1), tag.kind) for tag in tags)  # -1: the run's own


@pytest.mark.django_db(transaction=True)
def test_a_run_that_ends_is_tagged_with_what_its_trace_shows(tiny_task):
    """A crashing script, a line that is not a message, the same listing three times in a row, the step limit."""
    script = [
        act("Write File", file_name="crash.py", content="import json\njson.loads('{')\n"),
        act("Execute Script", script_name="crash.py"),  # step 1: a traceback
        "this is not a message",  # step 2: Invalid Message
        act("List Files", dir_path="."),
        act("List Files", dir_path="."),
        act("List Files", dir_path="."),  # step 5: the third identical action in a row
        act("Final Answer", final_answer="never reached: the step limit comes first"),
    ]
    agent = AgentFactory(config={"script": script})
    run = run_execute(run_create(task=tiny_task.task, agent=agent, enqueue=False, limits=RunLimits(max_steps=6)).pk)

    assert run.failure_kind == Run.FailureKind.LIMIT, run.error
    assert kinds(run) == [
        (-1, "limit_reached"),
        (1, "script_crashed"),
        (2, "malformed_response"),
        (5, "repeated_action"),
    ]


@pytest.mark.django_db
def test_memory_a_prompt_too_long_and_an_action_stopped_at_a_limit_are_tagged_and_tagging_again_changes_nothing(
    tiny_task,
):
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, steps_count=3)
    now = timezone.now()
    memory = "it was killed for using more than the memory limit of 100 MB"
    steps = [
        Step.objects.create(run=run, index=0, action="Execute Script", started_at=now, is_error=True,
                            detail={"limit": memory}),
        Step.objects.create(run=run, index=1, action="Understand File", started_at=now),
        Step.objects.create(run=run, index=2, action="Execute Script", started_at=now, is_error=True,
                            detail={"limit": "it was stopped after the 60-second time limit of one action"}),
    ]  # fmt: skip
    LLMCall.objects.create(
        run=run,
        step=steps[1],
        step_index=1,
        model="m",
        error="HTTP 400: This model's maximum context length is 4096 tokens; the messages had 9000",
    )
    LLMCall.objects.create(run=run, step=steps[1], step_index=1, model="m", error="HTTP 502: bad gateway")

    first = tags_auto(run)
    again = tags_auto(run)

    assert kinds(run) == [(0, "out_of_memory"), (1, "prompt_too_long"), (2, "limit_reached")]
    assert len(first) == len(again) == ReviewTag.objects.filter(run=run).count() == 3


@pytest.fixture
def reviewer(django_user_model):
    user = django_user_model.objects.create_user("reader", password="x")
    user.groups.add(Group.objects.get_or_create(name=REVIEWER_GROUP)[0])
    return user


@pytest.fixture
def tagged_run(tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, steps_count=2)
    for index in range(2):
        Step.objects.create(run=run, index=index, action="Execute Script", started_at=timezone.now())
    return run


@pytest.mark.django_db
def test_a_reviewer_tags_a_step_with_a_comment_and_sees_it_on_the_run_page(client, reviewer, tagged_run):
    client.force_login(reviewer)
    url = reverse("runner:run_tag", args=[tagged_run.pk])

    response = client.post(url, {"kind": "hallucinated", "step": "1", "comment": "claims 0.99; the log says 0.71"})
    page = client.get(reverse("runner:run_detail", args=[tagged_run.pk])).content.decode()

    assert response.status_code == 302 and response.url.endswith(f"/runs/{tagged_run.pk}/#step-1")
    tag = ReviewTag.objects.get()
    assert (tag.step.index, tag.kind, tag.author, tag.comment) == (1, "hallucinated", reviewer, tag.comment)
    step1 = page.split('id="step-1"', 1)[1]
    assert "Hallucinated result" in step1 and "claims 0.99; the log says 0.71" in step1
    assert "tag this step" in page and "tag this run" in page  # the reviewer's forms


@pytest.mark.django_db
def test_a_steps_tag_form_is_loaded_when_a_reviewer_opens_it_not_carried_by_every_card(
    client, reviewer, tagged_run, people
):
    """The run page carries the run's tag form and, per step, a summary that loads the step's form: 40 cards once
    carried 40 forms, each with its list of failure modes."""
    url = reverse("runner:step_tag_form", args=[tagged_run.pk, 1])
    client.force_login(people["stranger"])
    refused = client.get(url)
    client.force_login(reviewer)
    page = client.get(reverse("runner:run_detail", args=[tagged_run.pk])).content.decode()
    form = client.get(url).content.decode()
    missing = client.get(reverse("runner:step_tag_form", args=[tagged_run.pk, 7]))

    assert page.count('name="kind"') == 1 and page.count("tag this step") == tagged_run.steps.count()
    assert f'hx-get="{url}"' in page
    assert '<input type="hidden" name="step" value="1">' in form and "Hallucinated result" in form
    assert 'name="csrfmiddlewaretoken"' in form
    assert refused.status_code == 403 and missing.status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "script_crashed"}, "unknown failure mode"),  # automatic kinds are not for reviewers
        ({"kind": "bad_plan", "step": "7"}, "has no step 7"),
        ({"kind": "bad_plan", "step": "-1"}, "is not a step index"),
        ({"kind": "bad_plan", "comment": "x" * 2001}, "at most 2000"),
    ],
)
def test_a_bad_tag_is_refused_with_the_reason_and_nothing_is_written(client, reviewer, tagged_run, data, message):
    client.force_login(reviewer)

    response = client.post(reverse("runner:run_tag", args=[tagged_run.pk]), data, follow=True)

    assert message in response.content.decode()
    assert not ReviewTag.objects.exists()


@pytest.mark.django_db
def test_only_reviewers_tag_and_only_a_tags_author_or_staff_remove_it_and_automatic_tags_stay(
    client, reviewer, tagged_run, people
):
    url = reverse("runner:run_tag", args=[tagged_run.pk])
    client.force_login(people["stranger"])
    refused = client.post(url, {"kind": "bad_plan"})
    page = client.get(reverse("runner:run_detail", args=[tagged_run.pk])).content.decode()
    theirs = ReviewTag.objects.create(run=tagged_run, kind="bad_plan", author=reviewer)
    automatic = ReviewTag.objects.create(run=tagged_run, kind="limit_reached")

    not_author = client.post(reverse("runner:run_tag_remove", args=[tagged_run.pk, theirs.pk]))
    client.force_login(reviewer)
    automatic_kept = client.post(reverse("runner:run_tag_remove", args=[tagged_run.pk, automatic.pk]), follow=True)
    removed = client.post(reverse("runner:run_tag_remove", args=[tagged_run.pk, theirs.pk]))

    assert refused.status_code == 403 and not_author.status_code == 403
    assert "tag this" not in page
    assert "cannot be removed" in automatic_kept.content.decode()
    assert removed.status_code == 302
    assert list(ReviewTag.objects.values_list("kind", flat=True)) == ["limit_reached"]


@pytest.mark.django_db
def test_the_runs_list_filters_by_a_tag_on_the_run_or_any_of_its_steps(client, tiny_task):
    crashed, looped, clean = (RunFactory(task_version=tiny_task) for _ in range(3))
    step = Step.objects.create(run=crashed, index=0, action="Execute Script", started_at=timezone.now())
    ReviewTag.objects.create(run=crashed, step=step, kind="script_crashed")
    ReviewTag.objects.create(run=looped, kind="debugging_loop")

    crashes = client.get(reverse("runner:run_list"), {"tag": "script_crashed"}).content.decode()
    unknown = client.get(reverse("runner:run_list"), {"tag": "nonsense"}).content.decode()

    assert f"/runs/{crashed.pk}/" in crashes and f"/runs/{looped.pk}/" not in crashes
    assert f"/runs/{clean.pk}/" not in crashes
    assert "Unknown review tag nonsense" in unknown and f"/runs/{clean.pk}/" in unknown
