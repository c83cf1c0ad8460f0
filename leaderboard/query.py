"""What a reader asks of the leaderboard in its query string: which runs count (``?versions=``, ``?infra=``,
``?origin=``, ``?category=``) and the order of its rows (``?sort=``). The page, its CSV and JSON exports and the API
read the same parameters (``BoardFilters``, on the runs list's machinery: ``runner.filters``) through
``board_query_parse``; ``board_sort`` orders the rows. No queries here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runner.filters import VERSIONS, Choice, QueryFilters, Text
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
    #: Whose rule of what counts: "" the platform's, "mlagentbench" MLAgentBench's tables', "mlagentbench-gpt4" the
    #: rule of its GPT-4 experiments (``?counting=``).
    counting: str = ""


#: The rules of what counts a reader may ask for, with the name the pages give each.
MLAGENTBENCH = "mlagentbench"
MLAGENTBENCH_GPT4 = "mlagentbench-gpt4"
#: The countings that measure improvements against plot.py's baseline.
PLOT_COUNTINGS = (MLAGENTBENCH, MLAGENTBENCH_GPT4)
COUNTINGS = {
    "": "this platform's counting",
    MLAGENTBENCH: "MLAgentBench's counting",
    MLAGENTBENCH_GPT4: "MLAgentBench's counting, as for its GPT-4 runs",
}

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
            counting=self.counting,
        )


def _sort_column(sort: str) -> str:
    return sort.removeprefix("-")


class BoardFilters(QueryFilters):
    """The leaderboard's query string: the page, its CSV and JSON exports and ``/api/v1/leaderboard/``."""

    versions = Choice(VERSIONS, default="current", expected="'current' or 'all'", help_text="which task versions count")
    infra = Choice(
        ["include"], expected="'include' (or no infra parameter)", help_text="count infrastructure failures as failed"
    )
    origin = Choice(
        ["verified", "all"],
        expected="'verified' or 'all' (self-reported runs included)",
        help_text="'all' counts self-reported (imported) runs too",
    )
    category = Choice(CATEGORIES, help_text="only the tasks of this category")
    counting = Choice(
        [MLAGENTBENCH, MLAGENTBENCH_GPT4],
        expected="'mlagentbench' or 'mlagentbench-gpt4' (or no counting parameter: this platform's)",
        help_text="'mlagentbench' counts as MLAgentBench's tables do: runs that ended in an error of theirs (the "
        "time limit, a budget, a crash) left out, and a final score only when it is above 0; 'mlagentbench-gpt4' as "
        "its tables count its GPT-4 runs: those runs kept, as not succeeded and without a score",
    )
    sort = Text(
        max_length=100,
        pattern=r"^-?(" + "|".join(SORT_COLUMNS) + r"|task:.+)$",
        help_text=f"order of the rows: a column ({', '.join(SORT_COLUMNS)} or task:SLUG, a task's success rate), "
        "'-' before it for descending; a row without a figure there comes last. Default: the ranking",
    )

    @staticmethod
    def clean_sort_value(sort: str | None) -> str:
        column = _sort_column(sort or "")
        if sort and column not in SORT_COLUMNS and not (column.startswith(TASK_SORT) and len(column) > len(TASK_SORT)):
            raise ValueError(
                f"expected a column ({', '.join(SORT_COLUMNS)} or task:SLUG), '-' before it for descending, "
                f"got {sort[:40]!r}"
            )
        return sort or ""


def board_query_parse(params: Mapping[str, str], *, strict: bool = False) -> tuple[BoardQuery, dict[str, str]]:
    """The query a reader asked for and, by parameter, what was wrong with it; a wrong parameter is left at its
    default (the page says so and shows the rest; the API, ``strict``, answers 400 naming it, an empty value
    included)."""
    values, errors = BoardFilters.parse(params, blank_is_absent=not strict)
    try:
        sort = BoardFilters.clean_sort_value(values["sort"])
    except ValueError as exc:
        errors["sort"], sort = str(exc), ""
    query = BoardQuery(
        current_only=values["versions"] != "all",
        include_infrastructure=values["infra"] == "include",
        include_self_reported=values["origin"] == "all",
        category=values["category"] or "",
        counting=values["counting"] or "",
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
