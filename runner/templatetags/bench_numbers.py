"""Numbers as the pages show them."""

from django import template

register = template.Library()


@register.filter
def percent(value, digits: int = 1) -> str:
    """A fraction as a percentage with one decimal (0.0989 -> "9.9%"), so a run just under a 10% threshold
    does not read as 10%; "—" when there is no value."""
    if value is None or value == "":
        return "—"
    return f"{float(value) * 100:.{int(digits)}f}%"
