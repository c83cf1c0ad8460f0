"""Reads for accounts: the account page."""

from __future__ import annotations

from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import Q, QuerySet

from runner.models import Agent, Run
from runner.selectors import runs_list

from .models import KEY_MARK, ApiToken

ACCOUNT_RECENT_RUNS = 20


def user_agents(*, user: AbstractBaseUser) -> QuerySet[Agent]:
    return Agent.objects.filter(owner=user).order_by("name", "-created_at")


def user_recent_runs(*, user: AbstractBaseUser, limit: int = ACCOUNT_RECENT_RUNS) -> list[Run]:
    """The newest runs of ``user``'s agents or of batches they started, as far as the access rule
    (``runs_visible_to``, through ``runs_list``) shows them to ``user``."""
    runs = runs_list(viewer=user).filter(Q(agent__owner=user) | Q(batch__created_by=user))
    return list(runs[:limit])


def user_tokens(*, user: AbstractBaseUser) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user)


def token_find(key: str) -> ApiToken | None:
    """The live token whose key is ``key`` (with its user), or None. The row is found by the key's prefix and
    the whole key compared with the stored digest in constant time."""
    if not key.startswith(KEY_MARK):
        return None
    prefix, sep, _secret = key[len(KEY_MARK) :].partition("_")
    if not sep or not prefix:
        return None
    token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
    if token is None or not token.matches(key):
        return None
    return token
