"""The API's named tokens: ``Authorization: Token mlb_...``."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from .models import KEY_MARK, ApiToken
from .selectors import token_find

#: ``last_used_at`` is written at most this often per token: no write (no query) on most requests.
LAST_USED_EVERY = timedelta(minutes=1)


class ApiTokenAuthentication(BaseAuthentication):
    """Authenticates a key of ``ApiToken`` under the ``Token`` keyword. A key without the ``mlb_`` mark is
    left to the next class (``rest_framework.authtoken``'s single tokens), so both kinds work side by side.
    The OpenAPI schema describes it through ``accounts.schema``."""

    keyword = "Token"

    def authenticate_header(self, request) -> str:
        return self.keyword

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if len(parts) != 2 or parts[0].lower() != self.keyword.lower().encode():
            return None
        try:
            key = parts[1].decode()
        except UnicodeError:
            return None
        if not key.startswith(KEY_MARK):
            return None
        return self.authenticate_credentials(key)

    def authenticate_credentials(self, key):
        token = token_find(key)
        if token is None:
            raise AuthenticationFailed("Invalid or revoked token.")
        if not token.user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        now = timezone.now()
        if token.last_used_at is None or token.last_used_at < now - LAST_USED_EVERY:
            # Conditional: of concurrent requests with one token, one writes.
            ApiToken.objects.filter(pk=token.pk).filter(
                Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_EVERY)
            ).update(last_used_at=now)
        return token.user, token
