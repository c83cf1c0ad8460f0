"""The leaderboard's figures are computed once per ranking generation and cached: after every kind of write that
changes what rankings count (a run ending, failing as an infrastructure failure, cancelled, forked, imported; a
task disabled, a new task version, a reference score, an agent made public), the cached figures, for every viewer and
every filter, are those a computation from scratch gives, and the leaderboard's API, CSV and the home page say
the same."""

import csv
import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.db.models import Count, Q
from django.test import Client
from django.urls import reverse

from leaderboard import selectors
from leaderboard.cache import ranking_generation
from leaderboard.exports import leaderboard_row_export
from leaderboard.query import RankingOptions
from runner.execution.endings import Ending
from runner.execution.evaluation import EvalResult
from runner.execution.recording import run_finish
from runner.models import Agent, ReviewTag, Run
from runner.services import run_cancel
from task_bank.models import TaskVersion
from task_bank.services import task_import, task_set_enabled
from tests.factories import TINY_FILES, AgentFactory, RunFactory, package_write

FILTERS = [
    RankingOptions(
        current_only=current, include_infrastructure=infra, include_self_reported=imported, category=category
    )
    for current in (True, False)
    for infra in (False, True)
    for imported in (False, True)
    for category in ("", "canonical")
]


@pytest.fixture
def people(db):
    users = get_user_model().objects
    return {
        "anonymous": AnonymousUser(),
        "owner": users.create_user("owner", password="pw"),
        "stranger": users.create_user("stranger", password="pw"),
        "staff": users.create_user("staff", password="pw", is_staff=True),
    }


def _from_scratch(viewer, options: RankingOptions) -> dict:
    """Every cached figure, computed from the runs without the cache."""
    rows, cells = selectors.board_computed(viewer, options)
    runs, counted = selectors.ranked_runs(viewer=viewer, options=options)
    points = runs.filter(counted, improvement__isnull=False).values(*selectors.ENTRANT, "task__slug", "improvement")
    return {
        "rows": rows,
        "cells": cells,
        "points": list(points.order_by("task__slug", "pk")),
        "boxes": selectors._improvement_boxes(viewer=viewer, options=options),
    }


def _cached(viewer, options: RankingOptions) -> dict:
    rows, cells = selectors.leaderboard_board(viewer=viewer, options=options)
    return {
        "rows": rows,
        "cells": cells,
        "points": selectors.leaderboard_improvements(viewer=viewer, options=options),
        "boxes": selectors.leaderboard_improvement_boxes(viewer=viewer, options=options),
    }


def _home_counts_from_scratch(viewer) -> dict:
    runs, counted = selectors.ranked_runs(viewer=viewer)
    counts = runs.aggregate(
        counted=Count("pk", filter=counted), succeeded=Count("pk", filter=counted & Q(succeeded=True))
    )
    trials = selectors.runs_visible_to(viewer).trials()
    running = trials.on_worker().count()
    return counts | {"running": running, "queued": trials.live().count() - running}


def _assert_agrees(people: dict, step: str) -> None:
    """The cached figures equal the figures from scratch, for everyone and every filter; reading them caches them
    (twice: the second read is a hit), so the next write must change the generation to be seen."""
    for who, viewer in people.items():
        for options in FILTERS:
            expected = _from_scratch(viewer, options)
            for _ in range(2):
                assert _cached(viewer, options) == expected, f"after {step}: {who}, {options}"
        for _ in range(2):
            assert selectors.home_counts(viewer=viewer) == _home_counts_from_scratch(viewer), f"after {step}: {who}"


def _finish(run: Run, *, score: float | None, failure_kind: str = "", status: str = "finished") -> None:
    result = None if score is None else EvalResult(score=score, error="", log="", duration_s=1.0)
    run_finish(
        run_id=run.pk, attempt=run.attempt, ending=Ending(status=status, failure_kind=failure_kind), result=result,
        channel=None,
    )  # fmt: skip


def test_the_cached_leaderboard_agrees_with_a_computation_from_scratch_after_every_write(tiny_task, people, tmp_path):
    TaskVersion.objects.filter(pk=tiny_task.pk).update(baseline_score=1.0, reference_score=2.0)
    other, _ = task_import(root=package_write(tmp_path / "other", TINY_FILES), slug="other")
    TaskVersion.objects.filter(pk=other.pk).update(baseline_score=1.0)
    public = AgentFactory(name="open-book")
    private = AgentFactory(name="hidden-hand", owner=people["owner"], visibility=Agent.Visibility.PRIVATE)
    queued = [
        RunFactory(task_version=version, agent=agent, status=Run.Status.QUEUED, model=model)
        for version in (tiny_task, other)
        for agent in (public, private)
        for model in ("", "gpt-test")
    ]
    _assert_agrees(people, "the runs were queued")

    for n, run in enumerate(queued[:4]):
        _finish(run, score=1.1 + n / 10)
    _assert_agrees(people, "runs finished")

    _finish(queued[4], score=None, status=Run.Status.FAILED, failure_kind=Run.FailureKind.AGENT)
    _assert_agrees(people, "a run failed by the agent")

    Run.objects.filter(pk=queued[5].pk).update(status=Run.Status.RUNNING)
    _assert_agrees(people, "a run started")  # a live run counts nowhere yet, but on the home page
    _finish(queued[5], score=None, status=Run.Status.FAILED, failure_kind=Run.FailureKind.INFRASTRUCTURE)
    _assert_agrees(people, "a run failed as an infrastructure failure")

    run_cancel(run=queued[6])
    _assert_agrees(people, "a queued run was cancelled")

    Run.objects.filter(pk=queued[7].pk).update(status=Run.Status.TIMED_OUT, failure_kind=Run.FailureKind.LIMIT)
    _assert_agrees(people, "a run timed out")

    Run.objects.filter(pk=queued[4].pk).update(improved_any_step=True)  # it failed, a step of it succeeded
    _assert_agrees(people, "a step of an ended run was scored and beat the baseline")  # success at any step

    tag = ReviewTag.objects.create(run=queued[2], kind=ReviewTag.Kind.HALLUCINATED)
    _assert_agrees(people, "a review tag was written")
    tag.delete()
    _assert_agrees(people, "a review tag was removed")

    Run.objects.filter(pk=queued[0].pk).update(forked_from=queued[1], fork_step=0)
    _assert_agrees(people, "a run became a fork")

    TaskVersion.objects.filter(pk=other.pk).update(reference_score=3.0)
    _assert_agrees(people, "a version got a reference score")
    TaskVersion.objects.filter(pk=tiny_task.pk).update(reference_score=3.0)
    _assert_agrees(people, "a version's reference score changed")

    Agent.objects.filter(pk=private.pk).update(visibility=Agent.Visibility.PUBLIC)
    _assert_agrees(people, "the private agent was made public")

    task_set_enabled(task=other.task, enabled=False)
    _assert_agrees(people, "a task was disabled")
    task_set_enabled(task=other.task, enabled=True)

    files = {**TINY_FILES, "scripts/research_problem.txt": "Make value.txt hold an even larger number."}
    new_version, created = task_import(root=package_write(tmp_path / "tiny-2", files), slug="tiny")
    assert created
    _assert_agrees(people, "a new version of a task")

    RunFactory(task_version=new_version, agent=public, improvement=0.4, succeeded=True)
    _assert_agrees(people, "a run of the new version was written")

    RunFactory(task_version=new_version, agent=public, origin=Run.Origin.SELF_REPORTED, improvement=0.2, succeeded=True)
    _assert_agrees(people, "a self-reported run was imported")
    Run.objects.filter(pk=queued[2].pk).update(origin=Run.Origin.SELF_REPORTED)
    _assert_agrees(people, "a run became self-reported")

    Run.objects.filter(task_version=new_version).delete()
    _assert_agrees(people, "a run was deleted")


def test_the_leaderboard_page_api_csv_and_home_page_show_what_a_computation_from_scratch_gives(tiny_task, people):
    TaskVersion.objects.filter(pk=tiny_task.pk).update(baseline_score=1.0)
    agent = AgentFactory(name="open-book")
    run = RunFactory(task_version=tiny_task, agent=agent, status=Run.Status.QUEUED)
    client = Client()
    assert client.get("/api/v1/leaderboard/").json() == []  # cached: no runs counted
    for htmx in ({}, {"HTTP_HX_REQUEST": "true"}):  # the page and its table alone: cached with no row
        assert "No benchmark runs have ended yet" in client.get("/leaderboard/?sort=runs", **htmx).content.decode()
    before = ranking_generation()

    _finish(run, score=1.5)

    assert ranking_generation() != before
    expected = [leaderboard_row_export(r) for r in _from_scratch(AnonymousUser(), FILTERS[0])["rows"]]
    assert expected and expected[0]["runs"] == 1 and expected[0]["successes"] == 1
    assert client.get("/api/v1/leaderboard/").json() == expected
    exported = list(csv.DictReader(io.StringIO(client.get("/leaderboard/?format=csv").content.decode())))
    assert [(r["agent"], r["runs"], r["successes"]) for r in exported] == [("open-book", "1", "1")]
    for htmx in ({}, {"HTTP_HX_REQUEST": "true"}):
        table = client.get("/leaderboard/?sort=runs", **htmx).content.decode()
        assert "No benchmark runs have ended yet" not in table and "100.0% [20.7–100.0] n=1" in table
    home = client.get(reverse("leaderboard:home"))
    assert home.context["counts"] == {"counted": 1, "succeeded": 1, "running": 0, "queued": 0}


def test_a_heartbeat_or_a_step_of_a_live_run_leaves_the_cache_as_it_is(tiny_task):
    run = RunFactory(task_version=tiny_task, status=Run.Status.RUNNING)
    before = ranking_generation()

    Run.objects.filter(pk=run.pk).update(steps_count=3, tokens_in=100, cost=0.1)

    assert ranking_generation() == before
