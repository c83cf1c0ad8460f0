import pytest
from django.core.exceptions import ImproperlyConfigured

from bench.settings import env_float, env_int
from core.shared_cache import SHARED_CACHE_TABLE, shared_cache


def test_a_number_setting_that_is_not_a_number_names_the_variable(monkeypatch):
    monkeypatch.setenv("BENCH_TASK_MAX_BYTES", "abc")
    with pytest.raises(ImproperlyConfigured, match="BENCH_TASK_MAX_BYTES must be a whole number, got 'abc'"):
        env_int("BENCH_TASK_MAX_BYTES", 1)
    monkeypatch.setenv("BENCH_HEARTBEAT_S", "soon")
    with pytest.raises(ImproperlyConfigured, match="BENCH_HEARTBEAT_S must be a number, got 'soon'"):
        env_float("BENCH_HEARTBEAT_S", 5.0)
    monkeypatch.setenv("BENCH_HEARTBEAT_S", "2.5")
    assert env_float("BENCH_HEARTBEAT_S", 5.0) == 2.5
    monkeypatch.delenv("BENCH_TASK_MAX_BYTES")
    assert env_int("BENCH_TASK_MAX_BYTES", 7) == 7


def test_vendored_libraries_are_served_offline_and_cached_long(client):
    response = client.get("/static/vendor/plotly-cartesian-3.7.0.min.js")
    assert response.status_code == 200
    assert response["Cache-Control"] == "public, max-age=31536000, immutable"
    assert client.get("/static/css/bench.css")["Cache-Control"] != "public, max-age=31536000, immutable"


def test_collected_static_files_are_sent_compressed(client, settings, tmp_path):
    from django.core.management import call_command

    settings.STATIC_ROOT, settings.WHITENOISE_USE_FINDERS = tmp_path / "static", False
    call_command("collectstatic", "--noinput", verbosity=0)
    plotly = "/static/vendor/plotly-cartesian-3.7.0.min.js"
    plain = client.get(plotly)
    packed = client.get(plotly, HTTP_ACCEPT_ENCODING="gzip, deflate")
    assert (plain.status_code, packed.status_code, packed["Content-Encoding"]) == (200, 200, "gzip")
    assert int(packed["Content-Length"]) < int(plain["Content-Length"]) / 2


def test_a_missing_page_says_what_was_not_found_inside_the_site(client, db):
    response = client.get("/runs/999999/")
    html = response.content.decode()
    assert response.status_code == 404
    assert "<h1>Not found</h1>" in html and 'href="/tasks/"' in html


def test_the_favicon_is_found_where_browsers_look_for_it(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"
    assert client.get(response["Location"]).status_code == 200


def settings_with(monkeypatch, **env) -> dict:
    """bench/settings.py read afresh under these environment variables."""
    import runpy
    from pathlib import Path

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(Path(__file__).parent.parent / "bench" / "settings.py"))


def test_emails_go_to_the_console_unless_an_smtp_server_is_named(monkeypatch):
    monkeypatch.delenv("BENCH_EMAIL_HOST", raising=False)
    assert settings_with(monkeypatch)["EMAIL_BACKEND"] == "django.core.mail.backends.console.EmailBackend"

    smtp = settings_with(
        monkeypatch,
        BENCH_EMAIL_HOST="mail.example.org",
        BENCH_EMAIL_PORT="465",
        BENCH_EMAIL_USER="bench",
        BENCH_EMAIL_PASSWORD="secret",
        BENCH_EMAIL_USE_TLS="off",
        BENCH_EMAIL_USE_SSL="on",
        BENCH_EMAIL_FROM="Bench <bench@example.org>",
    )
    assert smtp["EMAIL_BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"
    assert (smtp["EMAIL_HOST"], smtp["EMAIL_PORT"], smtp["EMAIL_HOST_USER"], smtp["EMAIL_HOST_PASSWORD"]) == (
        "mail.example.org",
        465,
        "bench",
        "secret",
    )
    assert (smtp["EMAIL_USE_TLS"], smtp["EMAIL_USE_SSL"], smtp["DEFAULT_FROM_EMAIL"]) == (
        False,
        True,
        "Bench <bench@example.org>",
    )
    with pytest.raises(ImproperlyConfigured, match="only one of BENCH_EMAIL_USE_TLS and BENCH_EMAIL_USE_SSL"):
        settings_with(monkeypatch, BENCH_EMAIL_USE_TLS="on")


def test_the_limits_count_in_a_database_table_unless_a_redis_server_is_named(monkeypatch):
    monkeypatch.delenv("BENCH_SHARED_CACHE_URL", raising=False)
    caches = settings_with(monkeypatch)["CACHES"]
    assert caches["default"]["BACKEND"] == "django.core.cache.backends.locmem.LocMemCache"
    assert caches["shared"]["BACKEND"] == "django.core.cache.backends.db.DatabaseCache"
    assert caches["shared"]["LOCATION"] == SHARED_CACHE_TABLE

    redis = settings_with(monkeypatch, BENCH_SHARED_CACHE_URL="redis://cache.internal:6379/3")["CACHES"]
    assert redis["shared"] == {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://cache.internal:6379/3",
    }
    assert redis["default"]["BACKEND"] == "django.core.cache.backends.locmem.LocMemCache"

    with pytest.raises(
        ImproperlyConfigured,
        match=r"BENCH_SHARED_CACHE_URL must be the URL of a Redis server.*"
        r"got 'memcached://cache.internal:11211'",
    ):
        settings_with(monkeypatch, BENCH_SHARED_CACHE_URL="memcached://cache.internal:11211")


def test_every_per_user_rate_counts_in_the_shared_cache():
    """The real-process test (tests/integration/test_shared_throttle.py) drives the run requests' rate and the
    sign-in limit; the upload rates are the same class."""
    from runner.throttles import AgentUploadThrottle, LogUploadThrottle, RunRequestThrottle

    for limit in (AgentUploadThrottle, RunRequestThrottle, LogUploadThrottle):
        assert limit.cache is shared_cache, limit


@pytest.mark.django_db
def test_runners_migration_makes_the_shared_cache_table_and_its_reverse_drops_it():
    """Whatever BENCH_SHARED_CACHE_URL says when it runs, so the table is there once the default is chosen."""
    import importlib

    from django.db import connection

    migration = importlib.import_module("runner.migrations.0017_shared_cache_table")
    with connection.schema_editor() as editor:
        migration.table_drop(None, editor)
    assert SHARED_CACHE_TABLE not in connection.introspection.table_names()
    with connection.schema_editor() as editor:
        migration.table_create(None, editor)
    assert SHARED_CACHE_TABLE in connection.introspection.table_names()
    shared_cache.set("probe", 1)
    assert shared_cache.get("probe") == 1
