"""``{% submissions_pending as n %}``: how many submissions wait for approval (the header's link for staff);
``{% runs_held as n %}``: how many runs wait for a reviewer (the header's link for reviewers and staff)."""

from django import template

from ..models import Run, Submission

register = template.Library()


@register.simple_tag
def submissions_pending() -> int:
    return Submission.objects.filter(approval=Submission.Approval.PENDING).count()


@register.simple_tag
def runs_held() -> int:
    return Run.objects.filter(review=Run.Review.HELD).count()
