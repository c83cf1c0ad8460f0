"""``{% submissions_pending as n %}``: how many submissions wait for approval (the header's link for staff)."""

from django import template

from ..models import Batch

register = template.Library()


@register.simple_tag
def submissions_pending() -> int:
    return Batch.objects.filter(created_by__isnull=False, approval=Batch.Approval.PENDING).count()
