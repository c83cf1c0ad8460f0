"""The per-user and per-address limits count once across web processes (core.shared_cache): two real gunicorn
processes on one database, requests split between them, refused at the rate and not at twice it; a restarted
process still refuses. On the database table (the default) and on Redis (BENCH_SHARED_CACHE_URL)."""

from __future__ import annotations

import http.cookiejar
import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import nullcontext
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.test import override_settings
from rest_framework.authtoken.models import Token

from core.shared_cache import count_now, counts_clear
from tests.core.test_healthz import free_port
from tests.integration.conftest import REDIS_URL, ROOT, service_env, shared_database_url

pytestmark = pytest.mark.integration

RUN_REQUEST_RATE = 4
SIGNIN_PER_MINUTE = 3


class WebProcess:
    """One gunicorn process of the platform, on a free loopback port, that can be stopped and started again."""

    def __init__(self, env: dict[str, str], log_path: Path):
        self.env, self.log_path = env, log_path
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        command = [sys.executable, "-m", "gunicorn", "bench.wsgi", "--bind", f"127.0.0.1:{self.port}", "--workers", "1"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/healthz", timeout=10)
                return
            except urllib.error.HTTPError:
                return  # answering (a 503 names a service; the limits do not need the broker)
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise AssertionError(self.log_path.read_text()) from None
                time.sleep(0.3)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(15)
            self.process = None


@pytest.fixture(params=["database", "redis"])
def web_pair(request, transactional_db, tmp_path):
    """Two web processes sharing this test's database and, for "redis", a Redis shared cache."""
    shared_url = REDIS_URL if request.param == "redis" else ""
    clear_counts()  # counts an earlier run of this test left (user ids repeat)
    env = service_env(
        DATABASE_URL=shared_database_url(),
        CELERY_BROKER_URL=REDIS_URL,
        BENCH_VAR_DIR=str(tmp_path),
        BENCH_SHARED_CACHE_URL=shared_url,
        BENCH_RUN_REQUEST_RATE=f"{RUN_REQUEST_RATE}/hour",
        BENCH_SIGNIN_PER_MINUTE=str(SIGNIN_PER_MINUTE),
    )
    pair = [WebProcess(env, tmp_path / f"web-{n}.log") for n in (1, 2)]
    try:
        for web in pair:
            web.start()
        yield request.param, pair
    finally:
        for web in pair:
            web.stop()
        clear_counts()


def post_status(url: str, *, data: dict | None = None, headers: dict | None = None, opener=None) -> int:
    body = urllib.parse.urlencode(data or {}).encode()
    request = urllib.request.Request(url, data=body, headers=headers or {}, method="POST")
    try:
        with (opener or urllib.request.build_opener()).open(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture
def one_counting_window():
    """The web processes count on the real clock, so this process reads their counts on it too (not the frozen
    clock tests/conftest.py gives tests that count in this process); a test here that crosses a window's boundary
    tries again."""


def clear_counts() -> None:
    counts_clear()
    stale = list(redis.Redis.from_url(REDIS_URL).scan_iter(":1:count:*"))
    if stale:
        redis.Redis.from_url(REDIS_URL).delete(*stale)


def run_requests_round(backend: str, first: WebProcess, second: WebProcess, users: list) -> tuple[list[int], ...]:
    """Empty requests for runs from the first user split between the two processes, one more after the first
    process restarts, one from the second user; with the count the shared store holds for the first user. Each
    request is counted (the throttle comes before the request is read), then refused as a 400 or a 429."""
    ada, bob = (
        {"Authorization": f"Token {Token.objects.create(user=user).key}", "Accept": "application/json"}
        for user in users
    )
    split = [post_status(f"{web.url}/api/v1/submissions/", headers=ada) for web in [first, second] * RUN_REQUEST_RATE]
    first.stop()
    first.start()
    restarted = post_status(f"{first.url}/api/v1/submissions/", headers=ada)
    other_user = post_status(f"{second.url}/api/v1/submissions/", headers=bob)
    shared = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    with override_settings(CACHES={**settings.CACHES, "shared": shared}) if backend == "redis" else nullcontext():
        counted = count_now(f"throttle_run_requests_{users[0].pk}", window_s=3600)
    return split, [restarted, other_user], [counted]


def test_requests_for_runs_split_between_two_processes_are_refused_at_the_rate_and_after_a_restart(
    web_pair, django_user_model
):
    backend, (first, second) = web_pair
    # The rate counts per clock hour: a round that crossed into the next hour is tried again with new users.
    for attempt in range(3):
        users = [
            django_user_model.objects.create_user(f"{name}{attempt}", password="correct horse battery 9")
            for name in ("ada", "bob")
        ]
        hour = time.time() // 3600
        split, after, counted = run_requests_round(backend, first, second, users)
        if time.time() // 3600 == hour:
            break
        clear_counts()
    assert split == [400] * RUN_REQUEST_RATE + [429] * RUN_REQUEST_RATE
    assert after == [429, 400]  # still refused after a restart; counted per user
    # Every attempt counted once (the refused ones too), in the store the web processes share: Redis, or the table.
    assert counted == [2 * RUN_REQUEST_RATE + 1]


def signin_status(web: WebProcess) -> int:
    """A wrong password posted to the sign-in form, with the form's CSRF token as a browser would."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(f"{web.url}/account/login/", timeout=30) as response:
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.read().decode()).group(1)
    data = {"csrfmiddlewaretoken": token, "username": "nobody", "password": "wrong"}
    return post_status(f"{web.url}/account/login/", data=data, opener=opener)


def test_sign_ins_split_between_two_processes_are_refused_at_the_limit(web_pair):
    _backend, (first, second) = web_pair
    for _attempt in range(2):  # the count is per minute: a sequence that straddles two minutes is tried again
        minute = time.time() // 60
        statuses = [signin_status(web) for web in [first, second] * SIGNIN_PER_MINUTE]
        if time.time() // 60 == minute:
            break
        clear_counts()
    assert statuses == [200] * SIGNIN_PER_MINUTE + [429] * SIGNIN_PER_MINUTE, json.dumps(statuses)
