"""Charts are data: pure functions from rows to plotly figure dicts, handed to one Plotly.newPlot call."""

from __future__ import annotations

import plotly.graph_objects as go

from runner.charts import LAYOUT


def entrant(row: dict) -> str:
    model = f" · {row['model']}" if row.get("model") else ""
    return f"{row['agent__name']}@{row['agent__version']}{model}"


def success_by_task_figure(cells: list[dict]) -> dict:
    """Grouped bars: success rate (%) per task, one bar per agent/model."""
    tasks = sorted({c["task__slug"] for c in cells})
    entrants = sorted({entrant(c) for c in cells})
    figure = go.Figure(layout={**LAYOUT, "title": "Success rate per task", "barmode": "group"})
    for name in entrants:
        by_task = {c["task__slug"]: c for c in cells if entrant(c) == name}
        figure.add_bar(
            name=name,
            x=tasks,
            y=[round(100 * by_task[t]["success_rate"], 1) if t in by_task else None for t in tasks],
            customdata=[by_task[t]["runs"] if t in by_task else 0 for t in tasks],
            hovertemplate="%{x}: %{y}% of %{customdata} runs<extra>" + name + "</extra>",
        )
    figure.update_yaxes(title="runs beating the baseline by the threshold (%)", range=[0, 100])
    return figure.to_plotly_json()


def cost_vs_success_figure(rows: list[dict]) -> dict:
    """Scatter: mean cost per run against success rate, one point per agent/model."""
    figure = go.Figure(layout={**LAYOUT, "title": "Success against cost"})
    figure.add_scatter(
        x=[float(r["mean_cost"] or 0) for r in rows],
        y=[round(100 * r["success_rate"], 1) for r in rows],
        text=[entrant(r) for r in rows],
        mode="markers+text",
        textposition="top center",
        marker={"size": [8 + min(r["runs"], 40) for r in rows]},
        hovertemplate="%{text}<br>cost per run %{x:.4f}<br>success %{y}%<extra></extra>",
    )
    figure.update_xaxes(title="mean cost per run")
    figure.update_yaxes(title="success rate (%)", range=[-8, 115])
    return figure.to_plotly_json()
