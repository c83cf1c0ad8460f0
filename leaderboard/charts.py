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
        rates = [round(100 * by_task[t]["success_rate"], 1) if t in by_task else None for t in tasks]
        figure.add_bar(
            name=name,
            x=tasks,
            y=rates,
            # A label on every bar, so that 0% (runs, none succeeded) differs from no bar (no runs).
            text=[f"{rate:g}%" if rate is not None else "" for rate in rates],
            textposition="outside",
            cliponaxis=False,
            customdata=[by_task[t]["runs"] if t in by_task else 0 for t in tasks],
            hovertemplate="%{x}: %{y}% of %{customdata} runs<extra>" + name + "</extra>",
        )
    figure.update_yaxes(title="success rate (%)", range=[0, 112])
    return figure.to_plotly_json()


def cost_vs_success_figure(rows: list[dict]) -> dict:
    """Scatter: mean cost per run against success rate, one coloured, named point per agent/model."""
    figure = go.Figure(layout={**LAYOUT, "title": "Success against cost"})
    for row in sorted(rows, key=entrant):  # the bar chart's order, so each entrant has the same colour in both
        name = entrant(row)
        figure.add_scatter(
            name=name,
            x=[float(row["mean_cost"] or 0)],
            y=[round(100 * row["success_rate"], 1)],
            text=[name],
            mode="markers+text",
            textposition="middle right",
            marker={"size": 8 + min(row["runs"], 40)},
            hovertemplate="%{text}<br>cost per run %{x:.4f}<br>success %{y}%<extra></extra>",
        )
    highest = max((float(r["mean_cost"] or 0) for r in rows), default=0)
    top = highest * 1.3 if highest else 1
    figure.update_xaxes(title="mean cost per run", range=[-0.06 * top, top])  # costs start at 0; a margin for markers
    figure.update_yaxes(title="success rate (%)", range=[-8, 115])
    return figure.to_plotly_json()
