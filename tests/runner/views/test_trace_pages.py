"""The run page stays the same size however long the run: the last steps, earlier ones on demand, LLM calls and
long observations when opened, a live poll that sends only what is new, and cards cached per recorded step."""

import importlib.util
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from runner.models import Agent, LLMCall, Run, Step
from runner.selectors import OBSERVATION_PREVIEW_CHARS, TRACE_PAGE_STEPS
from tests.factories import AgentFactory, RunFactory

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"
sys.path.append(str(BENCHMARKS))  # trace_page.py imports its neighbour scratch.py
_spec = importlib.util.spec_from_file_location("bench_trace_page", BENCHMARKS / "trace_page.py")
trace_page = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(trace_page)  # its research-agent trace: the one benchmarks/trace_page.py measures


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


def steps_create(run: Run, count: int, **fields) -> list[Step]:
    now = timezone.now()
    return Step.objects.bulk_create(
        Step(run=run, index=i, action="List Files", observation=f"observation of step {i}.", started_at=now, **fields)
        for i in range(count)
    )


def step_ids(html: str) -> list[int]:
    return [int(part.split('"', 1)[0]) for part in html.split('id="step-')[1:]]


#: The run page's first paint is to stay under 200 kB (issue 30); the bound keeps room for a card that grows.
FIRST_PAINT_BYTES = 185_000


def test_the_first_paint_of_a_500_step_run_with_llm_calls_stays_under_185_kb(client, tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, steps_count=500)
    trace_page.step_rows(run, 500, calls=True)

    html = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()

    assert len(html.encode()) < FIRST_PAINT_BYTES
    # Not by leaving anything out: every card shown holds its entries, its observation and its calls' link, and
    # the steps before them load on demand.
    assert step_ids(html) == list(range(500 - TRACE_PAGE_STEPS, 500))
    assert html.count(">1 LLM call<") == TRACE_PAGE_STEPS
    assert "Run the script again with idea 499." in html and "epoch 498: loss 0.0498" in html
    assert "<mark>Try idea 495: a wider hidden layer and a lower learning rate.</mark>" in html
    assert f"?before={500 - TRACE_PAGE_STEPS}" in html


def test_a_card_keeps_every_space_the_step_holds(client, tiny_task):
    run = RunFactory(task_version=tiny_task)
    observation = "  indented\n\n\n    more\t tabs  \n"
    thought = "two  spaces\n\n  and a **marked\n  line**"
    Step.objects.create(
        run=run,
        index=0,
        action="Execute Script",
        action_input={"script_name": "a  b.py"},
        entries={"Thought": thought},
        observation=observation,
        started_at=timezone.now(),
    )

    html = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()

    assert f"<pre>{observation}</pre>" in html
    assert "<pre>two  spaces\n\n  and a <mark>marked\n  line</mark></pre>" in html
    assert "<pre>script_name: a  b.py\n</pre>" in html
    card = html[html.index('<details class="step-card">') : html.index("the workspace as a zip</a>")]
    assert '<span class="index">Step 0</span> <span class="action">Execute Script</span>' in card


@pytest.fixture
def long_run(tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED, steps_count=500)
    steps_create(run, 500)
    return run


def test_a_500_step_run_shows_its_last_steps_and_a_control_for_the_earlier_ones(client, long_run):
    html = client.get(reverse("runner:run_detail", args=[long_run.pk])).content.decode()

    assert step_ids(html) == list(range(500 - TRACE_PAGE_STEPS, 500))
    earlier = f"{reverse('runner:run_steps', args=[long_run.pk])}?before={500 - TRACE_PAGE_STEPS}"
    assert f'hx-get="{earlier}"' in html and f'href="{earlier}"' in html


def test_the_earlier_steps_control_loads_the_page_before_and_the_first_page_has_none(client, long_run):
    url = reverse("runner:run_steps", args=[long_run.pk])
    before = 500 - TRACE_PAGE_STEPS

    page = client.get(url, {"before": before}).content.decode()
    first = client.get(url, {"before": TRACE_PAGE_STEPS}).content.decode()

    assert step_ids(page) == list(range(before - TRACE_PAGE_STEPS, before))
    assert f'hx-get="{url}?before={before - TRACE_PAGE_STEPS}"' in page
    assert step_ids(first) == list(range(TRACE_PAGE_STEPS))
    assert "?before=" not in first  # nothing before step 0
    assert client.get(url, {"before": "x"}).status_code == 400


def test_the_page_costs_the_same_queries_for_500_steps_as_for_60(client, tiny_task, long_run):
    shorter = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED)
    steps_create(shorter, 60)
    counts = []
    for run in (shorter, long_run):
        with CaptureQueriesContext(connection) as queries:
            client.get(reverse("runner:run_detail", args=[run.pk]))
        counts.append(len(queries))
    # The run, its last steps, the chart's scored steps, the review tags of the run and of the steps shown (the
    # agent writes no plan, so none is looked up).
    assert counts == [4, 4]


def test_the_poll_sends_only_the_steps_after_the_last_one_shown(client, tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.RUNNING, steps_count=60, live_action="Write File")
    steps_create(run, 60)
    url = reverse("runner:run_poll", args=[run.pk])

    fragment = client.get(url, {"after": 56}).content.decode()

    assert step_ids(fragment) == [57, 58, 59]
    assert 'hx-swap-oob="beforeend:#steps"' in fragment
    assert f'hx-get="{url}?after=59"' in fragment  # the next poll asks for what follows
    assert "Write File" in fragment  # the live step, swapped out of band
    assert 'id="run-header" hx-swap-oob="true"' in fragment


def test_the_poll_of_an_ended_run_stops_polling(client, tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.FINISHED)
    steps_create(run, 3)
    fragment = client.get(reverse("runner:run_poll", args=[run.pk]), {"after": 2}).content.decode()
    assert step_ids(fragment) == []
    assert "hx-trigger" not in fragment.split("</div>", 1)[0]


def test_when_the_run_ends_staff_get_the_page_reloaded_for_its_buttons(client, admin_client, tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.RUNNING)
    steps_create(run, 1)
    url = reverse("runner:run_poll", args=[run.pk])
    assert "HX-Refresh" not in admin_client.get(url, {"after": 0})  # still live: new steps only

    Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED)

    assert admin_client.get(url, {"after": 0})["HX-Refresh"] == "true"  # the fork buttons come with the page
    assert "HX-Refresh" not in client.get(url, {"after": 0})  # a visitor has no buttons to get: no reload


def test_an_opened_llm_call_detail_loads_the_prompt_and_completion(client, tiny_task):
    run = RunFactory(task_version=tiny_task)
    (step,) = steps_create(run, 1)
    LLMCall.objects.create(
        run=run,
        step=step,
        step_index=0,
        model="test-model",
        messages=[{"role": "user", "content": "what is in the folder?"}],
        completion="List the files first.",
    )

    page = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    calls_url = reverse("runner:step_llm_calls", args=[run.pk, 0])
    calls = client.get(calls_url).content.decode()

    assert "1 LLM call<" in page and f'hx-get="{calls_url}"' in page
    assert "what is in the folder?" not in page  # prompts load when opened
    assert "what is in the folder?" in calls and "List the files first." in calls


def test_a_long_observation_shows_its_start_and_loads_the_rest_when_opened(client, tiny_task):
    run = RunFactory(task_version=tiny_task)
    text = "a" * OBSERVATION_PREVIEW_CHARS + "THE END"
    Step.objects.create(run=run, index=0, action="Inspect Script Lines", observation=text, started_at=timezone.now())

    page = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    whole = client.get(reverse("runner:step_observation", args=[run.pk, 0])).content.decode()

    assert "a" * OBSERVATION_PREVIEW_CHARS in page and "THE END" not in page
    assert f"the whole observation ({len(text)} characters)" in page
    assert "THE END" in whole


def test_a_plan_change_is_marked_on_the_first_step_shown_against_the_plan_written_before(client, tiny_task):
    run = RunFactory(task_version=tiny_task)
    steps = steps_create(run, TRACE_PAGE_STEPS + 2)
    plan = "Research Plan and Status"
    Step.objects.filter(pk=steps[0].pk).update(entries={plan: "1. look"})
    Step.objects.filter(pk=steps[2].pk).update(entries={plan: "1. look\n2. measure"})  # the first step shown

    html = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()

    assert step_ids(html)[0] == 2
    assert '<span class="changed-line">2. measure</span>' in html


def test_a_cached_card_shows_a_score_given_to_its_step_later(client, tiny_task):
    run = RunFactory(task_version=tiny_task)
    (step,) = steps_create(run, 1)
    url = reverse("runner:run_detail", args=[run.pk])
    assert "score 0.7500" not in client.get(url).content.decode()

    Step.objects.filter(pk=step.pk).update(score=0.75)

    assert "score 0.7500" in client.get(url).content.decode()


def test_a_recorded_steps_card_is_rendered_once(client, tiny_task):
    run = RunFactory(task_version=tiny_task)
    (step,) = steps_create(run, 1)
    url = reverse("runner:run_detail", args=[run.pk])
    client.get(url)

    # The row changes behind the cache's back (a recorded step never does): the page still shows the cached card.
    Step.objects.filter(pk=step.pk).update(action="Changed Behind The Cache")

    assert "Changed Behind The Cache" not in client.get(url).content.decode()


@pytest.mark.parametrize("name", ["run_steps", "run_poll", "step_llm_calls", "step_observation"])
def test_a_private_agents_run_is_a_404_to_others_on_every_trace_endpoint(client, tiny_task, name):
    owner = get_user_model().objects.create_user("owner", password="pw")
    get_user_model().objects.create_user("other", password="pw")
    agent = AgentFactory(owner=owner, visibility=Agent.Visibility.PRIVATE)
    run = RunFactory(task_version=tiny_task, agent=agent)
    steps_create(run, 2)
    args = [run.pk] if name in ("run_steps", "run_poll") else [run.pk, 1]
    url = reverse(f"runner:{name}", args=args)
    query = {"before": 2, "after": 0}

    assert client.get(url, query).status_code == 404
    client.login(username="other", password="pw")
    assert client.get(url, query).status_code == 404
    client.login(username="owner", password="pw")
    assert client.get(url, query).status_code == 200
