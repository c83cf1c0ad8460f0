"""What a reader asks of the leaderboard in its query string: which runs count (``?versions=``, ``?infra=``,
``?origin=``, ``?category=``) and the order of its rows (``?sort=``). The page, its CSV and JSON exports and the API
read the same parameters through ``board_query_parse``; ``board_sort`` orders the rows. No queries here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from task_bank.package import CATEGORIES

from .stats import ranking_key

#: The columns rows can be sorted by (``?sort=NAME`` ascending, ``?sort=-NAME`` descending), and the direction a
#: header's first click asks for: the better end first (the higher rate, the lower cost). ``task:SLUG`` sorts by
#: the success rate on one task.
SORT_COLUMNS = {
    "agent": "asc",
    "tasks": "desc",
    "runs": "desc",
    "infrastructure_failures": "asc",
    "success_rate": "desc",
    "mean_improvement": "desc",
    "mean_normalised": "desc",
    "mean_cost": "asc",
    "mean_tokens": "asc",
    "mean_seconds": "asc",
}
TASK_SORT = "task:"


@dataclass(frozen=True)
class RankingOptions:
    """Which runs a ranking counts, as every ranking selector takes it (``selectors.counted_runs`` and
    ``ranked_runs`` apply it) and the ranking cache keys its figures by."""

    #: Only the runs of each task's current version (``?versions=all`` turns it off).
    current_only: bool = True
    #: Infrastructure failures counted as failed runs (``?infra=include``), to show what they change.
    include_infrastructure: bool = False
    #: Runs imported from logs made elsewhere (``?origin=all``) counted beside those the platform executed.
    include_self_reported: bool = False
    #: Only the tasks of this category; "" for every category.
    category: str = ""


DEFAULT_OPTIONS = RankingOptions()


@dataclass(frozen=True)
class BoardQuery(RankingOptions):
    """The runs the board counts and the order of its rows; ``sort`` empty means the ranking (``ranking_key``)."""

    sort: str = ""

    def options(self) -> RankingOptions:
        """What the selectors take: the query without its order."""
        return RankingOptions(
            current_only=self.current_only,
            include_infrastructure=self.include_infrastructure,
            include_self_reported=self.include_self_reported,
            category=self.category,
        )


def _sort_column(sort: str) -> str:
    return sort.removeprefix("-")


def board_query_parse(params: Mapping[str, str]) -> tuple[BoardQuery, dict[str, str]]:
    """The query a reader asked for and, by parameter, what was wrong with it; a wrong parameter is left at its
    default (the page says so and shows the rest, the API answers 400 naming it)."""
    errors: dict[str, str] = {}
    versions = params.get("versions", "current")
    if versions not in ("current", "all"):
        errors["versions"] = f"expected 'current' or 'all', got {versions[:40]!r}"
    infra = params.get("infra")
    if infra not in (None, "include"):
        errors["infra"] = f"expected 'include' (or no infra parameter), got {infra[:40]!r}"
    origin = params.get("origin")
    if origin not in (None, "verified", "all"):
        errors["origin"] = f"expected 'verified' or 'all' (self-reported runs included), got {origin[:40]!r}"
    category = params.get("category") or ""
    if category and category not in CATEGORIES:
        errors["category"] = f"expected one of {', '.join(CATEGORIES)}, got {category[:40]!r}"
        category = ""
    sort = params.get("sort") or ""
    column = _sort_column(sort)
    if sort and column not in SORT_COLUMNS and not (column.startswith(TASK_SORT) and len(column) > len(TASK_SORT)):
        errors["sort"] = (
            f"expected a column ({', '.join(SORT_COLUMNS)} or task:SLUG), '-' before it for descending, "
            f"got {sort[:40]!r}"
        )
        sort = ""
    query = BoardQuery(
        current_only=versions != "all",
        include_infrastructure=infra == "include",
        include_self_reported=origin == "all",
        category=category,
        sort=sort,
    )
    return query, errors


def _value(line: dict, column: str) -> object:
    """What a matrix line is sorted by in ``column``: None where it has no figure."""
    row = line["row"]
    if column == "agent":
        return (row["agent__name"], row["agent__version"], row["model"])
    if column.startswith(TASK_SORT):
        cell = line["cells_by_task"].get(column.removeprefix(TASK_SORT))
        return cell["success_rate"] if cell else None
    return row[column]


def board_sort(lines: list[dict], *, sort: str) -> list[dict]:
    """The matrix lines (``{"row", "cells", "cells_by_task"}``) in the order ``sort`` asks for: by one column,
    ascending or descending ('-' first), a line without a figure there last either way, ties in ranking order.
    Without ``sort``, the ranking order."""
    ranked = sorted(lines, key=lambda line: ranking_key(line["row"]))
    if not sort:
        return ranked
    column, descending = _sort_column(sort), sort.startswith("-")
    with_value = [line for line in ranked if _value(line, column) is not None]
    without = [line for line in ranked if _value(line, column) is None]
    # sorted() is stable, reverse=True included: lines that tie keep the ranking order.
    return sorted(with_value, key=lambda line: _value(line, column), reverse=descending) + without


def sort_link(current: str, column: str) -> str:
    """The ``sort`` a column's header asks for: the other direction when the rows are sorted by it already,
    else its first direction (``SORT_COLUMNS``; a task's success rate: descending)."""
    if _sort_column(current) == column:
        return column if current.startswith("-") else f"-{column}"
    return column if SORT_COLUMNS.get(column) == "asc" else f"-{column}"
