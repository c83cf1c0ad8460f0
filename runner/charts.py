"""Charts are data: pure functions from rows to plotly figure dicts, handed to one Plotly.newPlot call."""

from __future__ import annotations

import plotly.graph_objects as go

LAYOUT = {
    "margin": {"l": 60, "r": 20, "t": 40, "b": 90},
    "height": 380,
    "font": {"family": "system-ui, sans-serif", "size": 12},
    "paper_bgcolor": "white",
    "plot_bgcolor": "white",
}


def score_over_steps_figure(steps: list[dict], *, baseline: float | None, metric: str) -> dict | None:
    """Line: the score of the workspace after each step (steps that were scored), with the baseline."""
    points = [(s["index"], s["score"]) for s in steps if s["score"] is not None]
    if not points:
        return None
    layout = {**LAYOUT, "height": 260, "margin": {**LAYOUT["margin"], "b": 45}, "title": f"{metric} after each step"}
    figure = go.Figure(layout=layout)
    figure.add_scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines+markers", name="score")
    if baseline is not None:
        figure.add_hline(y=baseline, line_dash="dash", annotation_text="baseline")
    figure.update_xaxes(title="step")
    figure.update_yaxes(title=metric)
    return figure.to_plotly_json()
