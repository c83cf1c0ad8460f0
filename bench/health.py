"""The web process's health check: ``GET /healthz`` answers 200 when the database and the job queue's broker
answer, else 503 naming what is down and why. For load balancers and container health checks: it needs no
sign-in, is never cached, and is not redirected to HTTPS (``SECURE_REDIRECT_EXEMPT``)."""

from __future__ import annotations

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


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks = {"database": database_check(), "broker": broker_check()}
    down = [name for name, result in checks.items() if result != "ok"]
    status = "ok" if not down else f"down: {', '.join(down)}"
    return JsonResponse({"status": status, **checks}, status=503 if down else 200)
