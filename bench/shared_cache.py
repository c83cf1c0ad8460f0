"""The cache every web process shares (``CACHES["shared"]``), for the counts of the per-user and per-address limits.

Django's default cache is this process's memory: right for what is only a cache (the leaderboard's figures, the
rendered step cards), wrong for a limit's count, which each of gunicorn's workers, each web container and each
restart would otherwise start again from nothing. The shared cache is a table in the database unless
BENCH_SHARED_CACHE_URL names a Redis server (``bench.settings``). runner's migration 0017 creates the table whatever
the setting, so the embedded default (``make run``) needs no other service;
``tests/integration/test_shared_throttle.py`` splits requests between two gunicorn processes on both backends and
restarts one.

A count is not incremented in one step on the database table: DRF's throttle reads its list of times and writes it
back, and ``DatabaseCache.incr`` is a read and a write. Requests sent at the same instant may each pass on the same
count, so a limit can be exceeded by the requests that race."""

from __future__ import annotations

from django.core.cache import caches
from django.utils.connection import ConnectionProxy
from rest_framework.throttling import UserRateThrottle

SHARED_CACHE_ALIAS = "shared"

#: The table of the database-backed shared cache, created by runner's migration 0017.
SHARED_CACHE_TABLE = "bench_shared_cache"

shared_cache = ConnectionProxy(caches, SHARED_CACHE_ALIAS)


class SharedUserRateThrottle(UserRateThrottle):
    """DRF's per-user rate (its ``scope``'s rate in DEFAULT_THROTTLE_RATES), counted in the shared cache so the
    limit holds across web processes and restarts."""

    cache = shared_cache
