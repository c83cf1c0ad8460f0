"""A limit's count is one atomic increment (core.shared_cache.count_hit): hits sent at the same instant from many
connections each get a count of their own, on the database table and on Redis alike, so none passes a limit by
racing another (15 of 30 parallel sign-ups once passed a limit of 5)."""

import threading

import pytest
from django.core.cache import caches
from django.db import connection
from django.test import Client, override_settings

from core.shared_cache import count_hit, count_now, counts_clear

REDIS_SHARED = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "shared": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:6379/7"},
}


@pytest.fixture(params=["database", "redis"])
def store(request, settings, transactional_db):
    if request.param == "redis":
        settings.CACHES = REDIS_SHARED
        caches["shared"].close()
    counts_clear()
    yield request.param
    counts_clear()


def at_once(n: int, hit) -> list:
    """``hit()`` from ``n`` threads released together, each on a database connection of its own."""
    barrier, results, lock = threading.Barrier(n), [], threading.Lock()

    def one():
        try:
            barrier.wait()
            value = hit()
            with lock:
                results.append(value)
        finally:
            connection.close()

    threads = [threading.Thread(target=one) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def test_parallel_hits_each_get_a_count_of_their_own(store):
    counts = at_once(30, lambda: count_hit("race", window_s=3600)[0])

    assert sorted(counts) == list(range(1, 31))
    assert count_now("race", window_s=3600) == 30


@override_settings(BENCH_SIGNUP_PER_MINUTE=5)
def test_thirty_parallel_sign_ups_pass_a_limit_of_five_five_times(store, settings):
    def sign_up():
        name = f"user{threading.get_ident()}"
        data = {
            "username": name,
            "email": f"{name}@example.org",
            "password1": "correct horse 9!",
            "password2": "correct horse 9!",
        }
        return Client().post("/account/signup/", data).status_code

    statuses = at_once(30, sign_up)

    assert statuses.count(429) == 25, statuses
