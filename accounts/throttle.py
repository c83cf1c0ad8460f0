"""A few attempts a minute per address at signing up and in: counted in the cache all web processes share."""

from __future__ import annotations

from django.http import HttpRequest

from core.shared_cache import count_hit


def client_address(request: HttpRequest) -> str:
    """The address the request came from. X-Forwarded-For is not read: a client could write any address
    there and never be throttled."""
    return request.META.get("REMOTE_ADDR") or "unknown"


def throttle_hit(*, scope: str, request: HttpRequest, limit: int, window_s: int = 60) -> int:
    """Count one attempt of ``scope`` from the request's address in the current window. Returns 0 when it is
    within ``limit``, else the seconds until the window ends."""
    count, left = count_hit(f"throttle:{scope}:{client_address(request)}", window_s=window_s)
    return 0 if count <= limit else left
