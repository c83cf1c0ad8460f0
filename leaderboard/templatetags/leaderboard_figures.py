"""A leaderboard row's figures as the pages show them, and the link from a count to the runs behind it."""

from urllib.parse import urlencode

from django import template
from django.urls import reverse

from ..stats import mean_label, rate_label

register = template.Library()


@register.filter
def rate(row: dict) -> str:
    """The row's success rate with its 95% interval and n: "37.5% [13.7–69.4] n=8"."""
    return rate_label(successes=row["successes"], runs=row["runs"])


@register.filter
def improvement(row: dict) -> str:
    """The row's mean improvement with its 95% t interval and the number of scored runs."""
    return mean_label(mean=row["mean_improvement"], interval=row["improvement_interval"], count=row["scored"])


@register.simple_tag
def runs_url(row: dict, task: str = "", ranking: str = "counted", current: bool = True) -> str:
    """The runs list filtered to the runs behind one of the row's counts: its agent version and model (on
    ``task`` if given), the runs ``ranking`` names, of each task's current version if ``current``."""
    query = {"agent": row["agent__name"], "version": row["agent__version"], "model": row["model"]}
    if task:
        query["task"] = task
    query["ranking"] = ranking
    if current:
        query["current"] = "1"
    return f"{reverse('runner:run_list')}?{urlencode(query)}"


@register.filter
def points(value: float | None) -> str:
    """A difference of two rates in percentage points, signed: 0.125 -> "+12.5"."""
    return "—" if value is None else f"{100 * value:+.1f}"
