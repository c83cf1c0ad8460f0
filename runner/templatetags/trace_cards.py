"""What a step's card (``runner/_step_card.html``) shows of its row, computed only when the card is not cached."""

from django import template

from ..trace import entries_display, input_summary

register = template.Library()

register.filter("input_summary", input_summary)


@register.simple_tag
def step_entries(step, previous_plan):
    """The step's entries as (name, html, changed), plan lines new since ``previous_plan`` marked."""
    return entries_display(step, previous_plan)
