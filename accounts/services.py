"""Writes for accounts: signing up and API tokens."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import IntegrityError, transaction

from .models import KEY_MARK, ApiToken, key_digest


def user_signup(*, username: str, email: str, password: str) -> AbstractBaseUser:
    """A new submitter: an ordinary active user (signing in is the role; no flag, no group)."""
    return get_user_model().objects.create_user(username=username, email=email, password=password)


#: Tokens one user may hold at once: a forgotten script's token should be revoked, not piled up.
TOKENS_PER_USER_MAX = 20


class TokenLimitError(Exception):
    """The user holds TOKENS_PER_USER_MAX tokens already."""


@dataclass(frozen=True)
class NewToken:
    token: ApiToken
    key: str  # the whole key: shown once, never stored


def token_create(*, user: AbstractBaseUser, name: str) -> NewToken:
    """A new named token of ``user``. The key is ``mlb_<prefix>_<secret>`` (12 and 48 hex digits); only the
    prefix and the key's sha256 are stored. Raises TokenLimitError when ``user`` holds TOKENS_PER_USER_MAX
    tokens already."""
    if ApiToken.objects.filter(user=user).count() >= TOKENS_PER_USER_MAX:
        raise TokenLimitError(
            f"you hold {TOKENS_PER_USER_MAX} tokens, the most one account may: revoke one you no longer use first"
        )
    for _ in range(5):
        prefix = secrets.token_hex(6)
        key = f"{KEY_MARK}{prefix}_{secrets.token_hex(24)}"
        try:
            with transaction.atomic():
                token = ApiToken.objects.create(user=user, name=name, prefix=prefix, digest=key_digest(key))
        except IntegrityError:  # the prefix is taken (one chance in 2**48 per token): draw another
            continue
        return NewToken(token=token, key=key)
    raise RuntimeError("could not draw an unused token prefix")


def token_revoke(*, user: AbstractBaseUser, token_id: int) -> bool:
    """Revoke (delete) ``user``'s token ``token_id``; False when they have no such token."""
    deleted, _ = ApiToken.objects.filter(user=user, pk=token_id).delete()
    return deleted > 0
