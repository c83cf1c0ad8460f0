"""Who may do what beyond reading: staff (``is_staff``) and reviewers (members of the "reviewer" group, or staff),
who tag runs and steps with failure modes."""

from __future__ import annotations

REVIEWER_GROUP = "reviewer"


def is_staff(user) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active and user.is_staff)


def is_reviewer(user) -> bool:
    if is_staff(user):
        return True
    return bool(
        user is not None
        and user.is_authenticated
        and user.is_active
        and user.groups.filter(name=REVIEWER_GROUP).exists()
    )
