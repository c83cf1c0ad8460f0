"""A few attempts a minute per address at signing up and in: counted in the cache all web processes share."""

from __future__ import annotations

import time

from django.http import HttpRequest

from bench.shared_cache import shared_cache


def client_address(request: HttpRequest) -> str:
    """The address the request came from. X-Forwarded-For is not read: a client could write any address
    there and never be throttled."""
    return request.META.get("REMOTE_ADDR") or "unknown"


def throttle_hit(*, scope: str, request: HttpRequest, limit: int, window_s: int = 60) -> int:
    """Count one attempt of ``scope`` from the request's address in the current window. Returns 0 when it is
    within ``limit``, else the seconds until the window ends."""
    now = int(time.time())
    window = now // window_s
    key = f"throttle:{scope}:{client_address(request)}:{window}"
    shared_cache.add(key, 0, timeout=window_s + 1)
    try:
        count = shared_cache.incr(key)
    except ValueError:  # expired between add and incr: this attempt starts a fresh count
        shared_cache.set(key, 1, timeout=window_s + 1)
        count = 1
    if count <= limit:
        return 0
    return (window + 1) * window_s - now
