"""gunicorn's settings file (read from the working folder): its worker processes share one folder of Prometheus
metrics, so that a scrape of /metrics adds up every worker's requests (runner/metrics.py); and the longest request
line it takes is its maximum, 8,190 bytes, so a long query string reaches the API's own checks (a 400 naming the
parameter) and only a longer one gets gunicorn's 414 (declared on every operation: core/schema.py)."""

import os
import shutil
from pathlib import Path

_metrics = Path(
    os.environ.setdefault(
        "PROMETHEUS_MULTIPROC_DIR", str(Path(os.environ.get("BENCH_VAR_DIR", "var")).resolve() / "prometheus-web")
    )
)


limit_request_line = 8190
# No control socket (gunicornc is not used): its default path is one per user, so two servers on a host shared it.
control_socket_disable = True


def on_starting(server) -> None:
    """A new server counts from zero: the files of a previous one's processes go."""
    shutil.rmtree(_metrics, ignore_errors=True)
    _metrics.mkdir(parents=True, exist_ok=True)


def child_exit(server, worker) -> None:
    """A worker process that ended keeps its counts in the sum, and its live gauges leave it."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
