"""A leaderboard row's figures as the pages show them, and the link from a count to the runs behind it."""

from django import template

from ..links import entrant_key, runs_href
from ..query import sort_link
from ..stats import mean_label, rate_label

register = template.Library()
register.filter("entrant_key", entrant_key)  # a row's name in a URL: agent@version[/model]


@register.filter
def rate(row: dict) -> str:
    """The row's success rate with its 95% interval and n: "37.5% [13.7–69.4] n=8"."""
    return rate_label(successes=row["successes"], runs=row["runs"])


@register.filter
def any_step_rate(row: dict) -> str:
    """The row's success at any point (some scored step beat the baseline) with its interval and n."""
    return rate_label(successes=row["any_step_successes"], runs=row["runs"])


@register.filter
def improvement(row: dict) -> str:
    """The row's mean improvement with its 95% t interval and the number of scored runs."""
    return mean_label(mean=row["mean_improvement"], interval=row["improvement_interval"], count=row["scored"])


# {% runs_url row ranking=... %}: the runs list filtered to the runs behind one of the row's counts.
register.simple_tag(runs_href, name="runs_url")


@register.filter
def normalised(row: dict | None) -> str:
    """The mean normalised score (0 = the baseline, 1 = the reference) and its n: "0.42 n=3"; "—" without one."""
    if not row or row.get("mean_normalised") is None:
        return "—"
    return f"{float(row['mean_normalised']):.2f} n={row['normalised_count']}"


@register.simple_tag
def sort_url(current: str, column: str) -> str:
    """The ``sort`` parameter a column's header link asks for (``query.sort_link``)."""
    return sort_link(current, column)


@register.filter
def points(value: float | None) -> str:
    """A difference of two rates in percentage points, signed: 0.125 -> "+12.5"."""
    return "—" if value is None else f"{100 * value:+.1f}"
