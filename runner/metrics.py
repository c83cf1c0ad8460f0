"""``/metrics``: the platform in Prometheus's text format, for an operator's Prometheus and Grafana
(``docs/deploy.md``, "Metrics", with a starter dashboard in ``docs/grafana-dashboard.json``).

Two sources, read at each scrape:

- the web server's requests (counts, latencies, responses by view and status), from django-prometheus's
  middleware. Under gunicorn each worker process writes its own files in ``PROMETHEUS_MULTIPROC_DIR``
  (``gunicorn.conf.py`` sets it) and a scrape adds them up, so every scrape sees the whole server;
- the state of the runs, read from the database (``PlatformCollector``): what every web process, worker and
  machine agree on. Runs by status and queue, how long the oldest queued run has waited, failures by kind, run
  time, steps, model calls, tokens and spend by model, and each worker's heartbeat age.

Only staff, or a scraper sending ``Authorization: Bearer <BENCH_METRICS_TOKEN>``, may read it."""

from __future__ import annotations

import hmac
import os

from django.conf import settings
from django.db.models import Case, Count, F, Min, Sum, Value, When
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

from core.db_clock import db_now

from .models import LLMCall, Run, Worker

#: The model label of the calls the gateway refused (no endpoint saw them).
REFUSED = "(refused)"


class PlatformCollector:
    """The runs' state as the database has it, at the moment of the scrape (a handful of grouped queries)."""

    def collect(self):
        now = db_now()  # heartbeats are in the database's clock
        runs = GaugeMetricFamily("bench_runs", "Runs by status and queue.", labels=["status", "queue"])
        for row in Run.objects.order_by().values("status", "queue").annotate(n=Count("id")):
            runs.add_metric([row["status"], row["queue"]], row["n"])
        yield runs

        waiting = GaugeMetricFamily(
            "bench_queue_oldest_seconds", "How long the oldest queued run of each queue has waited.", labels=["queue"]
        )
        # Since it was queued, or handed back or lost (its last heartbeat): a resumed run keeps its place in line.
        since = Coalesce("heartbeat_at", "created_at")
        queued = Run.objects.filter(status=Run.Status.QUEUED).order_by().values("queue").annotate(first=Min(since))
        for row in queued:
            waiting.add_metric([row["queue"]], (now - row["first"]).total_seconds())
        yield waiting

        failures = CounterMetricFamily(
            "bench_run_failures", "Ended runs that failed, by whose fault (failure kind).", labels=["kind"]
        )
        failed = Run.objects.filter(status=Run.Status.FAILED).order_by().values("failure_kind").annotate(n=Count("id"))
        for row in failed:
            failures.add_metric([row["failure_kind"] or "unknown"], row["n"])
        yield failures

        duration = SummaryMetricFamily(
            "bench_run_duration_seconds",
            "Wall time of ended runs, as counted against their time limits (time off a worker left out), by status.",
            labels=["status"],
        )
        ended = Run.objects.filter(finished_at__isnull=False, started_at__isnull=False).order_by()
        for row in ended.values("status").annotate(n=Count("id"), total=Sum("wall_seconds")):
            duration.add_metric([row["status"]], count_value=row["n"], sum_value=row["total"] or 0.0)
        yield duration

        steps = CounterMetricFamily("bench_steps", "Steps recorded, over every run.")
        steps.add_metric([], Run.objects.aggregate(n=Sum("steps_count"))["n"] or 0)
        yield steps

        calls = CounterMetricFamily(
            "bench_model_calls", "Model calls through the gateway, by model ('(refused)': none sent).", labels=["model"]
        )
        latency = CounterMetricFamily(
            "bench_model_call_seconds", "Time spent waiting for model answers, by model.", labels=["model"]
        )
        tokens = CounterMetricFamily(
            "bench_model_tokens", "Tokens, by model and direction.", labels=["model", "direction"]
        )
        spend = CounterMetricFamily(
            "bench_model_spend", "Model spend in the endpoints' price unit, by model.", labels=["model"]
        )
        # A refused call names whatever model the agent asked for: one label for them all, not one series each.
        model = Case(When(endpoint="", then=Value(REFUSED)), default=F("model"))
        by_model = (
            LLMCall.objects.order_by()
            .values(label=model)
            .annotate(
                n=Count("id"),
                seconds=Sum("latency_s"),
                tokens_in=Sum("tokens_in"),
                tokens_out=Sum("tokens_out"),
                cost=Sum("cost"),
            )
        )
        for row in by_model:
            calls.add_metric([row["label"]], row["n"])
            latency.add_metric([row["label"]], row["seconds"] or 0.0)
            tokens.add_metric([row["label"], "in"], row["tokens_in"] or 0)
            tokens.add_metric([row["label"], "out"], row["tokens_out"] or 0)
            spend.add_metric([row["label"]], float(row["cost"] or 0))
        yield from (calls, latency, tokens, spend)

        heartbeat = GaugeMetricFamily(
            "bench_worker_heartbeat_age_seconds",
            "Seconds since each worker that has not stopped last said it is alive.",
            labels=["worker", "queues"],
        )
        for worker in Worker.objects.filter(stopped_at__isnull=True).order_by("name"):
            age = (now - worker.heartbeat_at).total_seconds()
            heartbeat.add_metric([worker.name, ",".join(worker.queues or [])], age)
        yield heartbeat


def metrics_allowed(request: HttpRequest) -> bool:
    if request.user.is_authenticated and request.user.is_staff:
        return True
    token = settings.BENCH_METRICS_TOKEN
    sent = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(sent.encode(), f"Bearer {token}".encode())


def metrics(request: HttpRequest) -> HttpResponse:
    if not metrics_allowed(request):
        return HttpResponse(
            "The metrics are for staff, or for a scraper sending 'Authorization: Bearer <BENCH_METRICS_TOKEN>'.\n",
            status=403,
            content_type="text/plain",
        )
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        requests = CollectorRegistry()
        multiprocess.MultiProcessCollector(requests)  # every gunicorn worker's request metrics, added up
    else:
        requests = REGISTRY  # one process (the development server, a test)
    platform = CollectorRegistry()
    platform.register(PlatformCollector())
    body = generate_latest(requests) + generate_latest(platform)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
