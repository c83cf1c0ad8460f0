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
