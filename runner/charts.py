"""Charts are data: pure functions from rows to plotly figure dicts, handed to one Plotly.newPlot call. The dicts
are written directly, in the shape plotly's ``go.Figure(...).to_plotly_json()`` gives (building a ``go.Figure``
validates every property and cost tens of milliseconds per chart on a page)."""

from __future__ import annotations

from functools import cache

LAYOUT = {
    "margin": {"l": 60, "r": 20, "t": 40, "b": 90},
    "height": 380,
    "font": {"family": "system-ui, sans-serif", "size": 12},
    "paper_bgcolor": "white",
    "plot_bgcolor": "white",
}


@cache
def plot_text(text: str) -> str:
    """Text shown in a chart, as text: plotly reads names, titles and labels as its own HTML (a link, a line break),
    so a name a submitter chose (an agent's version) is written with entities."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def plotly_template() -> dict:
    """Plotly's default template (its colours, fonts and axis styles), as ``go.Figure`` puts it in every figure's
    layout: read once per process."""
    import plotly.io as pio

    return pio.templates[pio.templates.default].to_plotly_json()


def figure(data: list[dict], *, layout: dict) -> dict:
    """A figure dict: the traces (each a dict with its ``type``) and the layout, with plotly's default template."""
    return {"data": data, "layout": {**layout, "template": plotly_template()}}


def axis(title: str, **more) -> dict:
    """An axis of a layout (``xaxis``, ``yaxis``): its title and any other property."""
    return {"title": {"text": title}, **more}


def horizontal_lines(lines: list[tuple[float, str]], **line) -> dict:
    """The layout's ``shapes`` and ``annotations`` of dashed horizontal lines across the plot, each (y, label)
    labelled at its right end (as ``go.Figure.add_hline`` draws them); ``line`` adds to the line's style."""
    shapes = [
        {"line": {**line, "dash": "dash"}, "type": "line", "x0": 0, "x1": 1, "xref": "x domain", "y0": y, "y1": y,
         "yref": "y"}
        for y, _ in lines
    ]  # fmt: skip
    annotations = [
        {"showarrow": False, "text": label, "x": 1, "xanchor": "right", "xref": "x domain", "y": y,
         "yanchor": "bottom", "yref": "y"}
        for y, label in lines
    ]  # fmt: skip
    return {"shapes": shapes, "annotations": annotations} if lines else {}


def steps_layout(metric: str, lines: list[tuple[float, str]], *, height: int) -> dict:
    """The layout of a chart of ``metric`` after each step, with dashed horizontal ``lines`` (y, label)."""
    return {
        **LAYOUT,
        "height": height,
        "margin": {**LAYOUT["margin"], "b": 45},
        "title": {"text": f"{metric} after each step"},
        **horizontal_lines(lines),
        "xaxis": axis("step"),
        "yaxis": axis(metric),
    }


def score_over_steps_figure(
    steps: list[dict],
    *,
    baseline: float | None,
    metric: str,
    threshold: float | None = None,
    higher_is_better: bool = True,
) -> dict | None:
    """Line: the score of the workspace after each step (steps that were scored), with the baseline and the
    score a run must pass to succeed (``threshold`` better than the baseline, in the metric's direction). A
    point opens its step on the run page (``#step-N``)."""
    points = [(s["index"], s["score"]) for s in steps if s["score"] is not None]
    if not points:
        return None
    lines = []
    if baseline is not None:
        lines.append((baseline, "baseline"))
        if threshold is not None and baseline != 0:
            success = baseline + (1 if higher_is_better else -1) * threshold * abs(baseline)
            lines.append((success, f"success ({threshold:.0%} better)"))
    layout = steps_layout(metric, lines, height=260)
    trace = {
        "mode": "lines+markers",
        "name": "score",
        "x": [p[0] for p in points],
        "y": [p[1] for p in points],
        "customdata": [[f"step {index}", f"#step-{index}"] for index, _ in points],
        "hovertemplate": "step %{x}: %{y}<extra></extra>",
    }
    return figure([{**trace, "type": "scatter"}], layout=layout)


def scores_overlaid_figure(
    series: list[tuple[str, str, list[dict]]], *, baseline: float | None, metric: str
) -> dict | None:
    """Lines: the score after each scored step of several runs (each (name, href of its run page, scores)), on
    one chart with the baseline; a point opens that step of its run."""
    traces = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": plot_text(name),
            "x": [s["index"] for s in scores],
            "y": [s["score"] for s in scores],
            "customdata": [[plot_text(f"{name}, step {s['index']}"), f"{href}#step-{s['index']}"] for s in scores],
        }
        for name, href, scores in series
        if scores
    ]
    if not traces:
        return None
    layout = steps_layout(metric, [(baseline, "baseline")] if baseline is not None else [], height=300)
    return figure(traces, layout=layout)
