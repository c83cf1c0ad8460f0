"""Rates of what costs the platform work, per user, counted in the cache every web process shares: the site's forms
and the API use the same throttle, so one cannot be used to get around the other."""

from core.shared_cache import SharedUserRateThrottle


class RunRequestThrottle(SharedUserRateThrottle):
    """Requests for runs per user (staff starting runs, submissions), site and API together: the ``run_requests``
    rate in settings (BENCH_RUN_REQUEST_RATE)."""

    scope = "run_requests"


class LogUploadThrottle(SharedUserRateThrottle):
    """Log uploads per user (each stores a log of a ready task version; its scoring is a worker's job,
    ``runner.score_import``): the ``log_uploads`` rate in settings."""

    scope = "log_uploads"


class AgentUploadThrottle(SharedUserRateThrottle):
    """Uploads per user (each runs a smoke test in the sandbox): the ``agent_uploads`` rate in settings."""

    scope = "agent_uploads"
