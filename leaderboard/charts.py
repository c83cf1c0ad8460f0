"""Charts are data: pure functions from rows to plotly figure dicts (written directly: runner.charts.figure),
handed to one Plotly.newPlot call."""

from __future__ import annotations

from collections.abc import Callable

from runner.charts import LAYOUT, axis, figure, horizontal_lines, plot_text

from .stats import pareto_frontier

#: The entrants' legend in a row above the plot: at the side, long names took the plot's width.
LEGEND = {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"}


def _titled(text: str) -> dict:
    """A chart's title at the top of its box, clear of the legend row below it (which pushes the plot down)."""
    return {"text": text, "x": 0.02, "xanchor": "left", "yref": "container", "y": 0.985, "yanchor": "top"}


#: Plotly's default colours, so an entrant's lines share one colour.
PALETTE = ("#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692", "#B6E880", "#FF97FF", "#FECB52")


def entrant_colours(names) -> dict[str, str]:
    """One colour per entrant, by the sorted names of every entrant a page shows: each chart of the page draws an
    entrant in the same colour, whichever entrants that chart has."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(names)))}


def entrant(row: dict) -> str:
    """The entrant's name as a chart shows it (as text, whatever its version string holds)."""
    model = f" · {row['model']}" if row.get("model") else ""
    return plot_text(f"{row['agent__name']}@{row['agent__version']}{model}")


def _percent(value: float) -> float:
    return round(100 * value, 1)


def _error_bars(rows: list[dict | None]) -> dict:
    """Plotly's asymmetric error bars (in percentage points) of each row's 95% Wilson interval; none where a
    row is missing."""
    above, below = [], []
    for row in rows:
        interval = row["success_interval"] if row else None
        rate = row["success_rate"] if row else None
        above.append(_percent(interval[1] - rate) if interval else None)
        below.append(_percent(rate - interval[0]) if interval else None)
    return {"type": "data", "symmetric": False, "array": above, "arrayminus": below, "thickness": 1.2, "width": 3}


def _interval_text(row: dict) -> str:
    low, high = row["success_interval"]
    return f"[{_percent(low):g}–{_percent(high):g}%] n={row['runs']}"


def success_by_task_figure(cells: list[dict], *, colours: dict[str, str] | None = None) -> dict:
    """Grouped bars: success rate (%) per task, one bar per agent/model, with its 95% Wilson interval as an error
    bar (a rate over few runs says little: the bar shows how little)."""
    tasks = sorted({c["task__slug"] for c in cells})
    entrants = sorted({entrant(c) for c in cells})
    colours = colours or entrant_colours(entrants)
    bars = []
    for name in entrants:
        by_task = {c["task__slug"]: c for c in cells if entrant(c) == name}
        places = [by_task.get(t) for t in tasks]
        rates = [_percent(c["success_rate"]) if c else None for c in places]
        bars.append(
            {
                "name": name,
                "x": tasks,
                "y": rates,
                "error_y": _error_bars(places),
                # A label on every bar, so that 0% (runs, none succeeded) differs from no bar (no runs).
                "text": [f"{rate:g}%" if rate is not None else "" for rate in rates],
                # Inside the bar's foot, clear of the error bar; above a bar too low to hold it (0% included).
                "textposition": ["inside" if rate is not None and rate >= 12 else "outside" for rate in rates],
                "insidetextanchor": "start",
                "cliponaxis": False,
                "customdata": [_interval_text(c) if c else "" for c in places],
                "hovertemplate": "%{x}: %{y}% %{customdata}<extra>" + name + "</extra>",
                "marker": {"color": colours[name]},
                "type": "bar",
            }
        )
    layout = {
        **LAYOUT,
        "title": _titled("Success rate per task (95% interval)"),
        "legend": LEGEND,
        "barmode": "group",
        "yaxis": axis("success rate (%)", range=[0, 108]),
    }
    return figure(bars, layout=layout)


RATE_AXIS = (-8, 115)  # a success-rate axis with room for markers and labels at 0% and 100%

#: Where a point's label goes, in the order points that would share a place take them; past these, the label is
#: left to the legend and the hover (and the point keeps its colour).
LABEL_PLACES = (
    "middle right", "top right", "bottom right", "middle left", "top left", "bottom left", "top center",
    "bottom center",
)  # fmt: skip


def label_places(points: list[tuple[float, float]], *, x_span: float, y_span: float) -> list[str | None]:
    """A text position for each point's label such that points close together (within a tenth of the x axis and
    8% of the y axis: labels are wider than they are tall) take different places; None: no room, no label."""
    taken: list[tuple[float, float, str]] = []
    places: list[str | None] = []
    for x, y in points:
        near = {place for tx, ty, place in taken if abs(tx - x) <= x_span / 10 and abs(ty - y) <= y_span * 0.08}
        place = next((p for p in LABEL_PLACES if p not in near), None)
        places.append(place)
        if place is not None:
            taken.append((x, y, place))
    return places


def cost_vs_success_figure(
    rows: list[dict], *, href: Callable[[dict], str] | None = None, colours: dict[str, str] | None = None
) -> dict:
    """Scatter: mean cost per run against success rate with its 95% Wilson interval, one coloured, named point
    per agent/model (a row without a counted run has no rate, so no point), and the Pareto frontier of the points
    as a dotted step line (drawn from two points up). The frontier is of the point estimates: the intervals say
    how sure it is. ``href(row)``: where a click on the row's point leads (static/js/charts.js opens a point's
    ``customdata[1]``), the list of the runs behind it."""
    rows = sorted((r for r in rows if r["success_rate"] is not None), key=entrant)
    colours = colours or entrant_colours(entrant(r) for r in rows)
    highest = max((float(r["mean_cost"] or 0) for r in rows), default=0)
    top = highest * 1.3 if highest else 1
    points = [(float(r["mean_cost"] or 0), _percent(r["success_rate"])) for r in rows]
    places = label_places(points, x_span=top * 1.06, y_span=RATE_AXIS[1] - RATE_AXIS[0])
    traces = []
    for row, place in zip(rows, places, strict=True):
        name = entrant(row)
        traces.append(
            {
                "name": name,
                "x": [float(row["mean_cost"] or 0)],
                "y": [_percent(row["success_rate"])],
                "error_y": _error_bars([row]),
                "text": [name],
                "customdata": [[_interval_text(row), href(row) if href else ""]],
                "mode": "markers+text" if place else "markers",
                "textposition": place or "middle right",
                "marker": {"size": 8 + min(row["runs"], 40), "color": colours[name]},
                "hovertemplate": "%{text}<br>cost per run %{x:.4f}<br>success %{y}% %{customdata[0]}<extra></extra>",
                "type": "scatter",
            }
        )
    frontier = pareto_frontier(points)
    if len(rows) > 1:
        traces.append(
            {
                "name": "Pareto frontier",
                "x": [cost for cost, _ in frontier],
                "y": [rate for _, rate in frontier],
                "mode": "lines",
                "line": {"shape": "hv", "dash": "dot", "color": "#6b7280", "width": 1},
                # It passes through points: it takes no hover, so that a click there is the point's and opens its
                # runs.
                "hoverinfo": "skip",
                "type": "scatter",
            }
        )
    layout = {
        **LAYOUT,
        "title": _titled("Success against cost"),
        "legend": LEGEND,
        # costs start at 0; a margin for markers
        "xaxis": axis("mean cost per run", range=[-0.06 * top, top]),
        "yaxis": axis("success rate (%)", range=list(RATE_AXIS)),
    }
    return figure(traces, layout=layout)


def improvement_distribution_figure(improvements: list[dict], *, colours: dict[str, str] | None = None) -> dict:
    """Boxes: the improvement (%) of each scored counted run, per task (x) and agent/model (one box each, every
    run drawn beside it as a point), so a mean can be read with the spread behind it. ``improvements``: one dict
    per run, with the entrant's names, ``task__slug`` and ``improvement``."""
    names = sorted({entrant(r) for r in improvements})
    colours = colours or entrant_colours(names)
    boxes = []
    for name in names:
        runs = [r for r in improvements if entrant(r) == name]
        boxes.append(
            {
                "name": name,
                "x": [r["task__slug"] for r in runs],
                "y": [_percent(r["improvement"]) for r in runs],
                "boxpoints": "all",
                "jitter": 0.4,
                "pointpos": 0,
                "boxmean": True,
                "hovertemplate": "%{x}: %{y}%<extra>" + name + "</extra>",
                "marker": {"color": colours[name]},
                "type": "box",
            }
        )
    return figure(boxes, layout=_improvement_layout("Improvement over the baseline per task (each run a point)"))


def improvement_boxes_figure(boxes: list[dict], *, colours: dict[str, str] | None = None) -> dict:
    """Boxes: the improvement (%) of the scored counted runs per task (x) and agent/model, drawn from each cell's
    quartiles, extremes (the whiskers) and mean, without a point per run (the leaderboard's many-runs chart).
    ``boxes``: one dict per cell, with the entrant's names, ``task__slug``, ``quartiles`` (q1, median, q3),
    ``lowest``, ``highest``, ``mean`` and ``scored`` (as ``selectors.leaderboard_improvement_boxes`` gives)."""
    names = sorted({entrant(b) for b in boxes})
    colours = colours or entrant_colours(names)
    traces = []
    for name in names:
        cells = [b for b in boxes if entrant(b) == name]
        traces.append(
            {
                "name": name,
                "x": [b["task__slug"] for b in cells],
                "q1": [_percent(b["quartiles"][0]) for b in cells],
                "median": [_percent(b["quartiles"][1]) for b in cells],
                "q3": [_percent(b["quartiles"][2]) for b in cells],
                "lowerfence": [_percent(b["lowest"]) for b in cells],
                "upperfence": [_percent(b["highest"]) for b in cells],
                "mean": [_percent(b["mean"]) for b in cells],
                "text": [f"n={b['scored']}" for b in cells],
                "boxpoints": False,
                "hoverinfo": "x+y+text+name",
                "marker": {"color": colours[name]},
                "type": "box",
            }
        )
    title = "Improvement over the baseline per task (quartiles; whiskers at the extremes)"
    return figure(traces, layout=_improvement_layout(title))


def _improvement_layout(title: str) -> dict:
    """The layout both improvement charts share: boxes grouped per task, the improvement (%) up, 0 marked."""
    return {
        **LAYOUT,
        "title": _titled(title),
        "legend": LEGEND,
        "boxmode": "group",
        "yaxis": axis("improvement over the baseline (%)", zeroline=True),
    }


def task_scores_figure(
    steps: list[dict], finals: list[dict], *, baseline: float | None, reference: float | None, metric: str
) -> dict:
    """Lines: the score of each counted run's workspace after each scored step (one line per run, coloured by
    agent/model, named once in the legend), the runs' final scores as diamonds at their last step, and the
    baseline and the reference score as dashed lines. ``steps``: dicts of ``run_id``, ``index``, ``score`` and
    the entrant's names, in run and step order; ``finals``: dicts of ``pk``, ``steps_count``, ``final_score`` and
    the entrant's names, one per counted run with a final score."""
    names = sorted({entrant(r) for r in [*steps, *finals]})
    colours = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}
    by_run: dict[int, list[dict]] = {}
    for step in steps:
        by_run.setdefault(step["run_id"], []).append(step)
    traces = []
    named: set[str] = set()
    for run_id, run_steps in by_run.items():
        name = entrant(run_steps[0])
        traces.append(
            {
                "name": name,
                "legendgroup": name,
                "showlegend": name not in named,
                "x": [s["index"] for s in run_steps],
                "y": [s["score"] for s in run_steps],
                "mode": "lines+markers",
                "line": {"color": colours[name], "width": 1},
                "marker": {"size": 5},
                "hovertemplate": f"run {run_id}, step %{{x}}: %{{y}}<extra>{name}</extra>",
                "type": "scatter",
            }
        )
        named.add(name)
    for name in names:
        ended = [f for f in finals if entrant(f) == name]
        if ended:
            traces.append(
                {
                    "name": f"{name}: final scores",
                    "legendgroup": name,
                    "x": [max(f["steps_count"] - 1, 0) for f in ended],
                    "y": [f["final_score"] for f in ended],
                    "customdata": [f["pk"] for f in ended],
                    "mode": "markers",
                    "marker": {"symbol": "diamond", "size": 9, "color": colours[name]},
                    "hovertemplate": "run %{customdata}: final %{y}<extra>" + name + "</extra>",
                    "type": "scatter",
                }
            )
    lines = [(value, label) for value, label in ((baseline, "baseline"), (reference, "reference")) if value is not None]
    layout = {
        **LAYOUT,
        "title": {"text": f"{metric} over the steps of each run"},
        **horizontal_lines(lines, color="#6b7280"),
        "xaxis": axis("step"),
        "yaxis": axis(metric),
    }
    return figure(traces, layout=layout)
