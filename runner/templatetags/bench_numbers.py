"""Numbers as the pages show them."""

from django import template
from django.utils import timezone

register = template.Library()


@register.filter
def percent(value, digits: int = 1) -> str:
    """A fraction as a percentage with one decimal (0.0989 -> "9.9%"), so a run just under a 10% threshold
    does not read as 10%; "—" when there is no value."""
    if value is None or value == "":
        return "—"
    return f"{float(value) * 100:.{int(digits)}f}%"


@register.filter
def fixed(value, digits: int = 1) -> str:
    """A number with ``digits`` decimals (1.23456|fixed:4 -> "1.2346"), "—" when there is none: floatformat's
    figure for the lists' rows without its localisation (a runs page formats 100 numbers)."""
    if value is None or value == "":
        return "—"
    return f"{float(value):.{int(digits)}f}"


@register.filter
def minute(value) -> str:
    """A time to the minute in the site's time zone ("2026-11-30 21:09"), as ``date:"Y-m-d H:i"`` shows it."""
    if not value:
        return ""
    return (
        timezone.localtime(value).strftime("%Y-%m-%d %H:%M")
        if timezone.is_aware(value)
        else value.strftime("%Y-%m-%d %H:%M")
    )
