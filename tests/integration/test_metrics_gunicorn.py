"""The Procfile's gunicorn with gunicorn.conf.py: every /metrics scrape adds up the requests of both worker
processes, not one's share (PROMETHEUS_MULTIPROC_DIR); a long query string reaches the API's own checks, and only
one past 8,190 bytes gets gunicorn's 414, which the schema declares."""

import importlib.util
import json
import socket
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import ROOT

pytestmark = pytest.mark.integration

spec = importlib.util.spec_from_file_location("bench_procfile", ROOT / "benchmarks" / "procfile.py")
procfile = importlib.util.module_from_spec(spec)
spec.loader.exec_module(procfile)


def healthz_requests(text: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "django_http_requests_total_by_view_transport_method_total" and (
                sample.labels.get("view") == "healthz"
            ):
                return sample.value
    return 0.0


def test_every_scrape_counts_the_requests_of_every_gunicorn_worker(worker_env, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    services = {k: v for k, v in worker_env.items() if k in procfile.SERVICE_VARIABLES}
    env = procfile.process_env(**services, BENCH_PORT=str(port), BENCH_METRICS_TOKEN="scrape-me")
    web = procfile.web_start(env, log_path=tmp_path / "web.log")
    site = f"http://127.0.0.1:{port}"
    try:
        for _ in range(40):  # new connections: gunicorn's workers take them in turn
            with urllib.request.urlopen(f"{site}/healthz", timeout=10) as response:
                assert response.status == 200
        scrape = urllib.request.Request(f"{site}/metrics", headers={"Authorization": "Bearer scrape-me"})
        seen = []
        for _ in range(6):
            with urllib.request.urlopen(scrape, timeout=10) as response:
                seen.append(healthz_requests(response.read().decode()))
        answers = {}
        for length in (6000, 9000):
            try:
                urllib.request.urlopen(f"{site}/api/v1/runs/?agent={'a' * length}", timeout=10)
            except urllib.error.HTTPError as exc:
                answers[length] = (exc.code, exc.read().decode(errors="replace"))
        with urllib.request.urlopen(f"{site}/api/v1/schema/?format=json", timeout=10) as response:
            schema = json.loads(response.read())
    finally:
        procfile.process_stop(web)
    assert seen == [40.0] * 6, seen
    assert answers[6000][0] == 400 and "agent" in answers[6000][1]  # the API's own words on the parameter
    assert answers[9000][0] == 414
    operations = [op for path in schema["paths"].values() for op in path.values() if isinstance(op, dict)]
    assert operations and all("414" in op["responses"] for op in operations)
    assert (tmp_path / "web.log").read_text().count("Booting worker") >= 2  # two processes answered
