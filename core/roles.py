"""Who someone is on the site. Roles are not flags of their own:

- visitor: anyone, signed in or not (the public pages);
- submitter: any signed-in user (uploads agents and traces, sees their own private things);
- reviewer: a member of the Django group ``reviewer`` (created by a migration of ``accounts``; staff add people
  to it in the admin). Being staff does not make one a reviewer: add staff to the group to let them review;
- staff: ``is_staff`` (curates tasks, starts and cancels runs, uses the admin).

Pages and APIs ask these helpers, never the group's name or the flag directly.
"""

from __future__ import annotations

import functools

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied

REVIEWER_GROUP = "reviewer"

User = AbstractBaseUser | AnonymousUser


def is_submitter(user: User) -> bool:
    return bool(user.is_authenticated and user.is_active)


def is_reviewer(user: User) -> bool:
    return is_submitter(user) and user.groups.filter(name=REVIEWER_GROUP).exists()


def is_staff(user: User) -> bool:
    return is_submitter(user) and bool(user.is_staff)


def roles_of(user: User) -> list[str]:
    """The roles ``user`` holds, from the least to the most trusted."""
    roles = ["visitor"]
    if is_submitter(user):
        roles.append("submitter")
    if is_reviewer(user):
        roles.append("reviewer")
    if is_staff(user):
        roles.append("staff")
    return roles


def may_review(user: User) -> bool:
    """Reviewers and staff tag runs and steps with failure modes."""
    return is_reviewer(user) or is_staff(user)


def staff_required(view):
    """A view for staff: a visitor who is not signed in is sent to the site's sign-in page (not the admin's), and
    one who is but is not staff is refused (403)."""

    @functools.wraps(view)
    def for_staff(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not is_staff(request.user):
            raise PermissionDenied("this page is for staff")
        return view(request, *args, **kwargs)

    return for_staff
