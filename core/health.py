"""The web process's health check: ``GET /healthz`` answers 200 when the database and the job queue's broker
answer, else 503 naming what is down and why. For load balancers and container health checks: it needs no
sign-in, is never cached, and is not redirected to HTTPS (``SECURE_REDIRECT_EXEMPT``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout

from celery import current_app
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET


def database_check() -> str:
    """'ok', or why the database does not answer."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any failure to reach it is the answer, not an error of the check
        return f"down: {type(exc).__name__}: {str(exc).strip() or 'no answer'}"
    return "ok"


def broker_check() -> str:
    """'ok', or why the broker (CELERY_BROKER_URL) does not answer within BENCH_HEALTH_TIMEOUT_S."""
    timeout = settings.BENCH_HEALTH_TIMEOUT_S
    try:
        with current_app.connection_for_write(connect_timeout=timeout) as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
            conn.default_channel  # noqa: B018 - Redis answers a PING only when a channel is opened
    except Exception as exc:
        return f"down: {type(exc).__name__}: {str(exc).strip() or 'no answer'}"
    return "ok"


def checks_within(checks: dict[str, Callable[[], str]], timeout: float) -> dict[str, str]:
    """Every check at once, each given ``timeout`` seconds in all: one that has not answered by then is down, whatever
    its library does with a peer that accepts and never answers (the answer is never later than promised)."""
    pool = ThreadPoolExecutor(max_workers=len(checks), thread_name_prefix="healthz")
    futures = {name: pool.submit(_closing(check)) for name, check in checks.items()}
    deadline = time.monotonic() + timeout
    results = {}
    for name, future in futures.items():
        try:
            results[name] = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except FuturesTimeout:
            results[name] = f"down: no answer within {timeout:g} s"
    pool.shutdown(wait=False)  # a check still waiting ends at its socket's own time limit
    return results


def _closing(check: Callable[[], str]) -> Callable[[], str]:
    """The check, then the thread's database connection closed (a thread of its own opens one)."""

    def run() -> str:
        try:
            return check()
        finally:
            connection.close()

    return run


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks = checks_within({"database": database_check, "broker": broker_check}, settings.BENCH_HEALTH_TIMEOUT_S)
    down = [name for name, result in checks.items() if result != "ok"]
    status = "ok" if not down else f"down: {', '.join(down)}"
    return JsonResponse({"status": status, **checks}, status=503 if down else 200)
