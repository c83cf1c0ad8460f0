import pytest
from django.core.exceptions import ImproperlyConfigured

from bench.settings import env_float, env_int


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
    response = client.get("/static/vendor/plotly-3.7.0.min.js")
    assert response.status_code == 200
    assert response["Cache-Control"] == "public, max-age=31536000, immutable"
    assert client.get("/static/css/bench.css")["Cache-Control"] != "public, max-age=31536000, immutable"


def test_a_missing_page_says_what_was_not_found_inside_the_site(client, db):
    response = client.get("/runs/999999/")
    html = response.content.decode()
    assert response.status_code == 404
    assert "<h1>Not found</h1>" in html and 'href="/tasks/"' in html


def test_the_favicon_is_found_where_browsers_look_for_it(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"
    assert client.get(response["Location"]).status_code == 200
