"""gunicorn's settings file (read from the working folder): its worker processes share one folder of Prometheus
metrics, so that a scrape of /metrics adds up every worker's requests (runner/metrics.py); and the longest request
line it takes is its maximum, 8,190 bytes, so a long query string reaches the API's own checks (a 400 naming the
parameter) and only a longer one gets gunicorn's 414 (declared on every operation: core/schema.py)."""

import os
import shutil
import tempfile
from pathlib import Path

# A folder of this server's own, on this machine: two servers (two containers on one volume, two checkouts) never
# mix their processes' files. An operator's PROMETHEUS_MULTIPROC_DIR is used as given.
# (A reload reads this file again: the folder made at the start is kept, and still removed at the end.)
if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.environ["BENCH_METRICS_DIR_MADE"] = tempfile.mkdtemp(
        prefix="mlab-bench-metrics-"
    )
_metrics = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])


limit_request_line = 8190
# No control socket (gunicornc is not used): its default path is one per user, so two servers on a host shared it.
control_socket_disable = True


def on_starting(server) -> None:
    """A new server counts from zero: the files of a previous one's processes go (prometheus_client's only)."""
    _metrics.mkdir(parents=True, exist_ok=True)
    for old in _metrics.glob("*.db"):
        old.unlink(missing_ok=True)


def on_exit(server) -> None:
    if os.environ.get("BENCH_METRICS_DIR_MADE") == str(_metrics):
        shutil.rmtree(_metrics, ignore_errors=True)


def child_exit(server, worker) -> None:
    """A worker process that ended keeps its counts in the sum, and its live gauges leave it."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
