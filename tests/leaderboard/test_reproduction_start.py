"""Starting a reproduction: the runs it queues are the original's, exactly; what cannot be the same any more is
named before anything runs, and either refuses it or marks it not exact (docs/reproductions.md)."""

from decimal import Decimal

import pytest

from leaderboard.models import Reproduction
from leaderboard.query import RankingOptions
from leaderboard.selectors import leaderboard_rows
from leaderboard.services import ReproductionRefused, reproduction_of_row, reproduction_of_run
from runner.agents.submissions import submission_approve
from runner.models import Batch, LLMCall, ModelEndpoint, Run, Submission
from runner.services import RunRequestError
from task_bank.models import TaskVersion
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, RunFactory, package_write

ROW = {"agent__name": "solver", "agent__version": "1", "model": "m"}


@pytest.fixture
def row(tiny_task_ready, people, settings):
    """solver@1 with model m (owned by "owner"): three runs on tiny with its own limits, one of them cancelled."""
    ModelEndpoint.objects.create(name="m", base_url="http://127.0.0.1:9/v1", model_id="m-2025")
    solver = AgentFactory(name="solver", owner=people["owner"])
    fields = {"task_version": tiny_task_ready, "agent": solver, "model": "m", "sandbox": settings.BENCH_SANDBOX}
    limits = {"max_steps": 7, "max_time_s": 90, "max_tokens": 5000, "max_cost": Decimal("0.5"), "edit_model": "m"}
    runs = [RunFactory(**fields, **limits, succeeded=True), RunFactory(**fields, **limits, succeeded=False)]
    RunFactory(**fields, status=Run.Status.CANCELLED)
    return runs


def test_staff_reproduce_a_row_with_exactly_its_runs_settings(row, people):
    reproduction = reproduction_of_row(by=people["staff"], key=ROW)

    assert reproduction.exact and reproduction.differences == []
    assert set(reproduction.original_runs.all()) == set(row)  # the counted runs; not the cancelled one
    runs = list(reproduction.batch.runs.all())
    assert len(runs) == 2
    for run in runs:
        assert run.status == Run.Status.QUEUED and run.purpose == Run.Purpose.REPRODUCTION
        assert (run.task_version, run.agent, run.model, run.edit_model) == (row[0].task_version, row[0].agent, "m", "m")
        assert run.limits == row[0].limits and run.sandbox == row[0].sandbox
    assert reproduction.spec["tasks"][0]["digest"] == row[0].task_version.digest


def test_a_reproductions_runs_never_count_in_the_row_it_checks(row, people):
    before = leaderboard_rows(viewer=people["staff"])[0]["runs"]
    reproduction = reproduction_of_row(by=people["staff"], key=ROW)
    reproduction.batch.runs.update(status=Run.Status.FINISHED, succeeded=True)

    assert leaderboard_rows(viewer=people["staff"])[0]["runs"] == before == 2


def test_an_owners_reproduction_waits_for_staff_and_approval_queues_the_plan(row, people):
    reproduction = reproduction_of_row(by=people["owner"], key=ROW)

    submission = reproduction.batch.submission
    assert submission.approval == Submission.Approval.PENDING and not reproduction.batch.runs.exists()
    runs = submission_approve(submission=submission, by=people["staff"])
    assert len(runs) == 2 and {r.purpose for r in runs} == {Run.Purpose.REPRODUCTION}
    assert {r.max_steps for r in runs} == {7}


def test_nobody_else_reproduces_a_row(row, people):
    with pytest.raises(RunRequestError, match="only staff and the owner"):
        reproduction_of_row(by=people["stranger"], key=ROW)
    assert not Reproduction.objects.exists()


def test_a_disabled_endpoint_refuses_it_and_nothing_is_written(row, people):
    ModelEndpoint.objects.filter(name="m").update(is_enabled=False)

    with pytest.raises(ReproductionRefused, match="model endpoint m is disabled"):
        reproduction_of_row(by=people["staff"], key=ROW)
    assert not Reproduction.objects.exists() and not Batch.objects.exists()
    assert not Run.objects.filter(purpose=Run.Purpose.REPRODUCTION).exists()


def test_a_retired_task_refuses_it(row, people):
    row[0].task.is_enabled = False
    row[0].task.save()

    with pytest.raises(ReproductionRefused, match="task tiny is retired"):
        reproduction_of_run(by=people["staff"], run=row[0])


def test_a_superseded_task_version_is_named_and_the_current_one_runs(row, people, tmp_path):
    files = {**TINY_FILES, "env/train.py": 'open("value.txt", "w").write("3.0")\n'}
    newer, _ = task_import(root=package_write(tmp_path / "tiny2", files), slug="tiny")
    TaskVersion.objects.filter(pk=newer.pk).update(status=TaskVersion.Status.READY, baseline_score=2.0)

    reproduction = reproduction_of_row(by=people["staff"], key=ROW, options=RankingOptions(current_only=False))

    assert not reproduction.exact
    assert reproduction.differences == [
        f"task tiny v1 ({row[0].task_version.digest[:12]}) is no longer its current version: v2 "
        f"({newer.digest[:12]}) runs instead"
    ]
    assert {r.task_version_id for r in reproduction.batch.runs.all()} == {newer.pk}


def test_a_current_version_that_is_not_ready_refuses_it(row, people, tmp_path):
    files = {**TINY_FILES, "env/train.py": 'open("value.txt", "w").write("3.0")\n'}
    task_import(root=package_write(tmp_path / "tiny2", files), slug="tiny")  # pending validation

    with pytest.raises(ReproductionRefused, match="task tiny v2 is not validated"):
        reproduction_of_row(by=people["staff"], key=ROW, options=RankingOptions(current_only=False))


def test_a_changed_model_behind_the_same_name_is_named(row, people):
    LLMCall.objects.create(run=row[0], step_index=0, endpoint="m", model="m-2024")

    reproduction = reproduction_of_row(by=people["staff"], key=ROW)

    assert not reproduction.exact
    assert reproduction.differences == [
        "model endpoint m now sends model id 'm-2025'; the original runs' calls went to 'm-2024'"
    ]
    assert reproduction.batch.runs.count() == 2  # not exact, but it runs


def test_a_run_that_rankings_do_not_count_has_nothing_to_reproduce(row, people):
    cancelled = Run.objects.get(status=Run.Status.CANCELLED)

    with pytest.raises(ReproductionRefused, match="no counted run"):
        reproduction_of_run(by=people["staff"], run=cancelled)
