"""A few attempts a minute at signing up and in: counted in the cache all web processes share."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.http import HttpRequest

from core.shared_cache import count_hit


def client_address(request: HttpRequest) -> str:
    """The address the request came from. X-Forwarded-For is read only when the request came from one of
    ``BENCH_TRUSTED_PROXIES``: its last address that is not a trusted proxy (what the nearest proxy saw). From
    anyone else a client could write any address there and never be throttled."""
    remote = request.META.get("REMOTE_ADDR") or "unknown"
    trusted = settings.BENCH_TRUSTED_PROXIES
    if remote not in trusted:
        return remote
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    return next((hop for hop in reversed(hops) if hop not in trusted), remote)


def throttle_hit(*, scope: str, request: HttpRequest, limit: int, window_s: int = 60, of: str = "") -> int:
    """Count one attempt of ``scope`` from the request's address (and of the account ``of``, when given) in the
    current window. Returns 0 when it is within ``limit``, else the seconds until the window ends."""
    account = hashlib.sha256(of.strip().lower().encode()).hexdigest()[:32] if of else ""
    count, left = count_hit(f"throttle:{scope}:{client_address(request)}:{account}", window_s=window_s)
    return 0 if count <= limit else left
