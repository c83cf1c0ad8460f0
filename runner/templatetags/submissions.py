"""``{% submissions_pending as n %}``: how many submissions wait for approval (the header's link for staff)."""

from django import template

from ..models import Submission

register = template.Library()


@register.simple_tag
def submissions_pending() -> int:
    return Submission.objects.filter(approval=Submission.Approval.PENDING).count()
