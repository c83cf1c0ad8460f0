"""The cache every web process shares (``CACHES["shared"]``), for the counts of the per-user and per-address limits.

Django's default cache is this process's memory: right for what is only a cache (the leaderboard's figures, the
rendered step cards), wrong for a limit's count, which each of gunicorn's workers, each web container and each
restart would otherwise start again from nothing. The shared cache is a table in the database unless
BENCH_SHARED_CACHE_URL names a Redis server (``bench.settings``). runner's migration 0017 creates the table whatever
the setting, so the embedded default (``make run``) needs no other service;
``tests/integration/test_shared_throttle.py`` splits requests between two gunicorn processes on both backends and
restarts one.

A limit's count is one atomic increment that returns the new count (``count_hit``): Redis's INCR, or on the database
an INSERT ... ON CONFLICT DO UPDATE ... RETURNING on a table of its own (runner's migration 0019), since
``DatabaseCache.incr`` is a read and a write. Requests sent at the same instant each get a count of their own, so
none passes a limit by racing another. Counts are per fixed window (a minute, an hour): at most the limit in each.
``tests/core/test_shared_counter.py`` sends them in parallel."""

from __future__ import annotations

import random
import time

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.db import connection
from django.utils.connection import ConnectionProxy
from rest_framework.throttling import UserRateThrottle

SHARED_CACHE_ALIAS = "shared"

#: The table of the database-backed shared cache, created by runner's migration 0017.
SHARED_CACHE_TABLE = "bench_shared_cache"
#: The table of the database-backed counters, created by runner's migration 0019.
COUNTER_TABLE = "bench_shared_counter"

shared_cache = ConnectionProxy(caches, SHARED_CACHE_ALIAS)


def _window(key: str, window_s: int, now: float | None = None) -> tuple[str, int, int]:
    """The key of the current window, when it ends, and now (this machine's time unless given)."""
    now = int(time.time() if now is None else now)
    window = now // window_s
    return caches[SHARED_CACHE_ALIAS].make_key(f"count:{key}:{window}"), (window + 1) * window_s, now


def count_hit(key: str, *, window_s: int, now: float | None = None) -> tuple[int, int]:
    """Count one hit of ``key`` in the current window of ``window_s`` seconds, atomically: (the count with this hit,
    the seconds until the window ends). ``now``: the time that says which window, when not this machine's."""
    full_key, ends, now = _window(key, window_s, now)
    cache = caches[SHARED_CACHE_ALIAS]
    if isinstance(cache, RedisCache):
        pipe = cache._cache.get_client(full_key, write=True).pipeline()
        pipe.incr(full_key)
        pipe.expireat(full_key, ends + 1)
        count = int(pipe.execute()[0])
    else:
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {COUNTER_TABLE} (key, count, expires) VALUES (%s, 1, %s) "
                f"ON CONFLICT (key) DO UPDATE SET count = {COUNTER_TABLE}.count + 1 RETURNING count",
                [full_key[:255], ends],
            )
            count = int(cursor.fetchone()[0])
            if count == 1 and random.random() < 0.1:  # now and then, the windows that have ended go
                cursor.execute(f"DELETE FROM {COUNTER_TABLE} WHERE expires < %s", [now])
    return count, ends - now


def count_now(key: str, *, window_s: int) -> int:
    """The count of ``key`` in the current window, without a hit."""
    full_key, _, _ = _window(key, window_s)
    cache = caches[SHARED_CACHE_ALIAS]
    if isinstance(cache, RedisCache):
        return int(cache._cache.get_client(full_key).get(full_key) or 0)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count FROM {COUNTER_TABLE} WHERE key = %s", [full_key[:255]])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def counts_clear() -> None:
    """Forget every count (and the rest of the shared cache): for tests and for an operator starting afresh."""
    caches[SHARED_CACHE_ALIAS].clear()
    if not isinstance(caches[SHARED_CACHE_ALIAS], RedisCache):
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {COUNTER_TABLE}")


class SharedUserRateThrottle(UserRateThrottle):
    """DRF's per-user rate (its ``scope``'s rate in DEFAULT_THROTTLE_RATES), counted atomically in the shared store
    (``count_hit``) so the limit holds across web processes, restarts and requests sent at the same instant."""

    cache = shared_cache

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        count, self.wait_s = count_hit(self.key, window_s=self.duration)
        return count <= self.num_requests

    def wait(self) -> float | None:
        return getattr(self, "wait_s", None)
