"""The web process's health check: 200 when the database and the broker answer, 503 naming what is down."""

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.integration.conftest import REDIS_URL, ROOT, service_env, shared_database_url


def test_it_answers_200_when_the_database_and_the_broker_answer(client, db, settings):
    from bench.celery import app as celery_app
    from tests.brokers import use_broker

    old = celery_app.conf.broker_url
    use_broker(REDIS_URL)
    try:
        answer = client.get("/healthz")
    finally:
        use_broker(old)
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "database": "ok", "broker": "ok"}
    assert "no-cache" in answer["Cache-Control"]


def test_it_answers_503_naming_the_broker_when_the_broker_is_down(client, db, broker_down):
    answer = client.get("/healthz")
    assert answer.status_code == 503
    body = answer.json()
    assert body["status"] == "down: broker" and body["database"] == "ok"
    assert body["broker"].startswith("down: ") and broker_down.rsplit(":", 1)[1].split("/")[0] in body["broker"]


def test_a_broker_that_never_answers_is_down_not_a_hang(client, db, broker_frozen, settings):
    """It accepts connections and never answers: /healthz once gave nothing for 40 s. Each check has the health
    timeout in all, so the answer comes (a 503 naming the broker) instead of the client's own time-out."""
    settings.BENCH_HEALTH_TIMEOUT_S = 1.0

    answer = client.get("/healthz")

    assert answer.status_code == 503
    assert answer.json()["database"] == "ok" and answer.json()["broker"].startswith("down: ")


def test_a_job_sent_to_a_broker_that_never_answers_is_refused_not_hung(db, broker_frozen):
    """The write that cannot be queued says so (the API answers 503; the reaper sends the job later): its socket
    operations have time limits, so it is refused instead of hanging the request."""
    import threading

    from runner.jobs import SCORE_IMPORT, QueueUnreachable, job_send

    outcome = []

    def send():
        try:
            job_send(SCORE_IMPORT, 0)
            outcome.append("sent")
        except QueueUnreachable as exc:
            outcome.append(f"refused: {exc}")

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    thread.join(60)  # far longer than the broker's time limits allow; a hang would still be waiting

    assert outcome and outcome[0].startswith("refused"), outcome


def test_a_health_probe_over_plain_http_is_not_redirected_to_https(client, db, settings, broker_down):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/healthz").status_code == 503  # answered, not sent to https://
    assert client.get("/leaderboard/").status_code == 301


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.integration
def test_gunicorn_answers_503_naming_the_database_when_it_cannot_be_reached(transactional_db, tmp_path):
    """A real web process whose database is a port nothing listens on; its broker is the real Redis."""
    shared_database_url()  # skips unless the tests run on PostgreSQL
    port, dead = free_port(), free_port()
    env = service_env(
        DATABASE_URL=f"postgres://postgres@127.0.0.1:{dead}/bench",
        CELERY_BROKER_URL=REDIS_URL,
        BENCH_VAR_DIR=str(tmp_path),
    )
    command = [sys.executable, "-m", "gunicorn", "bench.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1"]
    log = open(tmp_path / "web.log", "wb")  # noqa: SIM115 - handed to the process
    web = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10)
                raise AssertionError("the health check answered 200 with the database down")
            except urllib.error.HTTPError as exc:
                status, body = exc.code, exc.read().decode()
                break
            except OSError:
                if time.monotonic() > deadline or web.poll() is not None:
                    raise AssertionError((tmp_path / "web.log").read_text()) from None
                time.sleep(0.3)
    finally:
        web.terminate()
        web.wait(15)
        log.close()
    assert status == 503
    assert '"status": "down: database"' in body and '"broker": "ok"' in body
    assert str(dead) in body  # the database's address, in the reason
