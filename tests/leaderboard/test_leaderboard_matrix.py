"""The leaderboard's table: one row per agent version and model, a column per task with runs, and in each cell
that entrant's figures on that task, or nothing where it has no runs there."""

from decimal import Decimal

import pytest
from django.contrib.auth.models import AnonymousUser

from leaderboard.selectors import leaderboard_matrix
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, RunFactory, package_write


@pytest.fixture
def second_task(tmp_path, db):
    version, _ = task_import(root=package_write(tmp_path / "other", TINY_FILES), slug="other")
    return version


def test_each_cell_holds_its_entrants_figures_on_its_task(tiny_task, second_task):
    both, one = AgentFactory(name="both"), AgentFactory(name="one")
    for succeeded, cost, tokens in [(True, "0.02", 100), (False, "0.04", 300)]:
        RunFactory(
            task_version=tiny_task,
            agent=both,
            succeeded=succeeded,
            improvement=0.1,
            cost=Decimal(cost),
            tokens_in=tokens,
        )
    RunFactory(task_version=second_task, agent=both, succeeded=True, improvement=0.4, wall_seconds=30.0)
    RunFactory(task_version=tiny_task, agent=one, model="m", succeeded=False, improvement=None)

    board = leaderboard_matrix(viewer=AnonymousUser())

    assert board["tasks"] == ["other", "tiny"]
    (first, first_cells), (second, second_cells) = [(line["row"], line["cells"]) for line in board["matrix"]]
    assert (first["agent__name"], first["runs"], first["tasks"]) == ("both", 3, 2)
    assert first["success_rate"] == pytest.approx(2 / 3)
    assert first["mean_improvement"] == pytest.approx(0.2)  # (0.1 + 0.1 + 0.4) / 3
    # sample sd sqrt((0.01 + 0.01 + 0.04) / 2) = 0.173205; t(2) = 4.302653; half-width 4.302653 * 0.173205 / sqrt(3)
    assert first["improvement_interval"] == (
        pytest.approx(0.2 - 0.430265, abs=1e-6),
        pytest.approx(0.2 + 0.430265, abs=1e-6),
    )
    assert first["success_interval"] == (pytest.approx(0.207659, abs=1e-6), pytest.approx(0.938509, abs=1e-6))
    assert first["mean_cost"] == Decimal("0.02")  # (0.02 + 0.04 + 0) / 3
    assert first["mean_tokens"] == pytest.approx(400 / 3) and first["mean_seconds"] == 10.0
    other, tiny = first_cells
    assert (other["runs"], other["success_rate"], other["mean_improvement"]) == (1, 1.0, 0.4)
    assert (tiny["runs"], tiny["success_rate"], tiny["mean_cost"]) == (2, 0.5, Decimal("0.03"))
    assert (second["agent__name"], second["model"], second["mean_improvement"]) == ("one", "m", None)
    assert second_cells[0] is None and second_cells[1]["runs"] == 1  # no runs on "other"


def test_an_empty_leaderboard_has_no_rows_tasks_or_cells(db):
    assert leaderboard_matrix(viewer=AnonymousUser()) == {"rows": [], "cells": [], "tasks": [], "matrix": []}
