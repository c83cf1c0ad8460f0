"""Reproductions through real runs on a real Celery worker: the baseline agent on the tiny task, two runs per task,
reproduced (it holds); reproduced after the task's version changed (named, not exact, and it differs); refused
when the endpoint its runs named is disabled (nothing runs). The tuner on digits, reproduced: it holds."""

import pytest

from leaderboard.models import Reproduction
from leaderboard.query import RankingOptions
from leaderboard.reproductions import reproduction_comparison
from leaderboard.services import ReproductionRefused, reproduction_of_row
from leaderboard.stats import DIFFERS, HOLDS
from runner.agents.builtin import agents_builtin_ensure
from runner.models import Batch, ModelEndpoint, Run, RunSpec
from runner.services import batch_create
from task_bank.models import TaskVersion
from task_bank.services import task_import
from tests.factories import TINY_FILES, package_write
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def builtin(name: str):
    return next(a for a in agents_builtin_ensure() if a.name == name)


def ended(runs, what: str, timeout_s: float = 300) -> list[Run]:
    pks = [run.pk for run in runs]
    wait_for(lambda: not Run.objects.live().filter(pk__in=pks).exists(), timeout_s, what)
    return list(Run.objects.filter(pk__in=pks).order_by("pk"))


def key(agent, model: str = "") -> dict:
    return {"agent__name": agent.name, "agent__version": agent.version, "model": model}


def test_the_baselines_row_reproduced_holds(celery_worker_process, tiny_task_ready, people):
    baseline = builtin("baseline")
    _, runs = batch_create(spec=RunSpec(baseline), tasks=[tiny_task_ready.task], repeats=2)
    originals = ended(runs, "the original runs")
    assert [r.status for r in originals] == [Run.Status.FINISHED] * 2 and not any(r.succeeded for r in originals)

    reproduction = reproduction_of_row(by=people["staff"], key=key(baseline))
    again = ended(reproduction.batch.runs.all(), "the reproduction's runs")

    assert [(r.status, r.task_version_id, r.purpose) for r in again] == [
        (Run.Status.FINISHED, tiny_task_ready.pk, Run.Purpose.REPRODUCTION)
    ] * 2
    assert reproduction.exact
    comparison = reproduction_comparison(reproduction)
    assert comparison["verdict"] == HOLDS
    low, high = comparison["result"]["interval"]  # as wide as a few runs a side allow
    assert comparison["result"]["difference"] == 0 and low < 0 < high


def test_a_row_reproduced_after_its_task_version_changed_differs(
    celery_worker_process, tiny_task_ready, people, tmp_path
):
    baseline = builtin("baseline")
    _, runs = batch_create(spec=RunSpec(baseline), tasks=[tiny_task_ready.task], repeats=2)
    ended(runs, "the original runs")
    # A new version of tiny whose starter code writes 3.0: the baseline agent now beats the baseline of 2.0 by 50%.
    files = {**TINY_FILES, "env/train.py": 'open("value.txt", "w").write("3.0")\n'}
    newer, _ = task_import(root=package_write(tmp_path / "tiny2", files), slug="tiny")
    TaskVersion.objects.filter(pk=newer.pk).update(status=TaskVersion.Status.READY, baseline_score=2.0)

    reproduction = reproduction_of_row(
        by=people["staff"], key=key(baseline), options=RankingOptions(current_only=False)
    )
    assert not reproduction.exact and "tiny v1" in reproduction.differences[0]
    again = ended(reproduction.batch.runs.all(), "the reproduction's runs")

    assert {r.task_version_id for r in again} == {newer.pk} and all(r.succeeded for r in again)
    comparison = reproduction_comparison(reproduction)
    assert comparison["verdict"] == DIFFERS
    low, high = comparison["result"]["interval"]
    assert comparison["result"]["difference"] == 1.0 and 0 < low < high <= 1.0


def test_a_row_whose_endpoint_is_disabled_is_refused_and_nothing_runs(
    celery_worker_process, tiny_task_ready, endpoint, people
):
    baseline = builtin("baseline")
    _, runs = batch_create(spec=RunSpec(baseline, endpoint.name), tasks=[tiny_task_ready.task], repeats=2)
    assert [r.status for r in ended(runs, "the original runs")] == [Run.Status.FINISHED] * 2
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(is_enabled=False)
    batches = Batch.objects.count()

    with pytest.raises(ReproductionRefused, match=f"model endpoint {endpoint.name} is disabled"):
        reproduction_of_row(by=people["staff"], key=key(baseline, endpoint.name))

    assert Batch.objects.count() == batches and not Reproduction.objects.exists()
    assert not Run.objects.filter(purpose=Run.Purpose.REPRODUCTION).exists()


def test_the_tuners_row_on_digits_reproduced_holds(celery_worker_process, digits, people):
    tuner = builtin("tuner")
    _, runs = batch_create(spec=RunSpec(tuner), tasks=[digits.task], repeats=2)  # its first run validates digits first
    originals = ended(runs, "the tuner's runs", timeout_s=900)
    assert all(r.status == Run.Status.FINISHED and r.succeeded for r in originals), [r.error for r in originals]

    reproduction = reproduction_of_row(by=people["staff"], key=key(tuner))
    ended(reproduction.batch.runs.all(), "the reproduction's runs", timeout_s=900)

    assert reproduction.exact and reproduction_comparison(reproduction)["verdict"] == HOLDS
