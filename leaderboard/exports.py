"""The leaderboard table as files: pure functions from the rows selectors give to CSV text and JSON data."""

from __future__ import annotations

import csv
import io

from .query import COUNTINGS, BoardQuery
from .selectors import ENTRANT


def leaderboard_row_export(row: dict) -> dict:
    """A leaderboard row as the API and the JSON and CSV exports give it: plain names, numbers as floats,
    intervals as [low, high], and (a row, not a cell) its counted runs per review tag, the most frequent first."""
    out = {"agent": row["agent__name"], "agent_version": row["agent__version"], "model": row["model"]}
    for key, value in row.items():
        if key == "tags":
            out["review_tags"] = {tag["kind"]: tag["runs"] for tag in value}
            continue
        if key == "reproduction":  # the row's latest reproduction, None without one
            out["reproduction"] = value and {"id": value["id"], "verdict": value["verdict"], "exact": value["exact"]}
            continue
        if key in ENTRANT or key == "task__slug":
            continue
        out[key] = _json_figure(key, value)
    return out


#: The CSV's columns, in order; an interval is split into its two bounds.
CSV_COLUMNS = (
    "agent",
    "agent_version",
    "model",
    "tasks",
    "runs",
    "successes",
    "infrastructure_failures",
    "success_rate",
    "success_low",
    "success_high",
    "any_step_successes",
    "any_step_rate",
    "scored",
    "mean_improvement",
    "improvement_low",
    "improvement_high",
    "normalised_count",
    "mean_normalised",
    "mean_cost",
    "mean_tokens",
    "mean_seconds",
    "mean_steps",
    "review_tags",
    "reproduction_id",
    "reproduction_verdict",
    "reproduction_exact",
    "counting",
)


def leaderboard_csv(rows: list[dict], *, counting: str = "") -> str:
    """One line per row, in the page's order; an empty field where a figure does not exist (no counted run,
    fewer than two scored runs for an interval). Each line names whose counting its figures follow."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        line = leaderboard_row_export(row)
        for name in ("success", "improvement"):
            low, high = line.pop(f"{name}_interval") or (None, None)
            line[f"{name}_low"], line[f"{name}_high"] = low, high
        line["review_tags"] = " ".join(f"{kind}={runs}" for kind, runs in line.get("review_tags", {}).items())
        reproduction = line.pop("reproduction", None) or {}
        for name in ("id", "verdict", "exact"):
            line[f"reproduction_{name}"] = reproduction.get(name)
        line["counting"] = counting or "platform"
        writer.writerow({k: "" if v is None else v for k, v in line.items()})
    return out.getvalue()


def leaderboard_json(board: dict, *, query: BoardQuery) -> dict:
    """The table as JSON: what was counted, the order, the rows (as the API gives them, in the page's order) and
    each row's cell per task."""
    return {
        "current_versions_only": query.current_only,
        "infrastructure_failures_counted": query.include_infrastructure,
        "self_reported_counted": query.include_self_reported,
        "category": query.category or None,
        "counting": query.counting or "platform",
        "counting_name": COUNTINGS[query.counting],
        "sort": query.sort or None,
        "rows": [leaderboard_row_export(r) for r in board["rows"]],
        "cells": [leaderboard_row_export(c) | {"task": c["task__slug"]} for c in board["cells"]],
    }


def _json_figure(key: str, value: object) -> object:
    """A figure as JSON holds it: an interval as a list of floats, a mean (a Decimal from the database) a float."""
    if isinstance(value, tuple):
        return [float(v) for v in value]
    if value is not None and key.startswith("mean"):
        return float(value)
    return value


def _figures(side: dict | None) -> dict | None:
    """One side's figures of a reproduction's comparison, as the leaderboard's rows export them."""
    if side is None:
        return None
    keep = ("runs", "successes", "success_rate", "success_interval", "scored", "mean_improvement")
    keep += ("improvement_interval", "mean_cost", "mean_seconds")
    out = {}
    for key in keep:
        value = side[key]
        out[key] = _json_figure(key, value)
    return out


def _difference(result: dict | None) -> dict | None:
    if result is None:
        return None
    interval = result["interval"]
    return {
        "difference": result["difference"],
        "interval": list(interval) if interval else None,
        "fewest_runs": result["fewest_runs"],
        "tasks": result["tasks"],
    }


def reproduction_export(reproduction, comparison: dict) -> dict:
    """A reproduction as the API gives it: what it re-ran, what is not the same, and the comparison with its
    verdict (success rates reproduction minus original, with the 95% interval; docs/reproductions.md)."""
    return {
        "id": reproduction.pk,
        "agent": reproduction.agent.name,
        "agent_version": reproduction.agent.version,
        "model": reproduction.model,
        "run": reproduction.source_run_id,
        "batch": reproduction.batch_id,
        "created_at": reproduction.created_at.isoformat(),
        "exact": reproduction.exact,
        "differences": reproduction.differences,
        "spec": reproduction.spec,
        "state": comparison["state"],
        "verdict": comparison["verdict"],
        "original": _figures(comparison["original"]),
        "reproduction": _figures(comparison["reproduction"]),
        "difference": _difference(comparison["result"]),
        "tasks": [
            {
                "task": line["task"],
                "verdict": line["verdict"],
                "original": _figures(line["original"]),
                "reproduction": _figures(line["reproduction"]),
                "difference": _difference(line["result"]),
            }
            for line in comparison["tasks"]
        ],
    }
