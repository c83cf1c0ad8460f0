"""Uploaded agents smoke-tested by a real worker, never within the upload's request: one upload's job sent at once,
another's sent by the reaper because the job queue was down when it was uploaded (the upload still succeeded)."""

import pytest

from core.shared_cache import counts_clear
from runner.execution.reaper import smokes_resend
from runner.models import Agent
from tests.brokers import closed_port_url, use_broker
from tests.integration.conftest import start_worker, stop_worker
from tests.runner.agents.test_agent_uploads import agent_zip, example_zip
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

CRASHER = {
    "agent.toml": 'name = "crasher"\nversion = "1"\nentrypoint = "crasher"\n',
    "crasher.py": "raise RuntimeError('missing weights: model.bin')\n",
}


def test_a_worker_smoke_tests_an_upload_and_one_whose_job_the_reaper_sent(worker_env, client, people, tmp_path):
    counts_clear()  # the upload throttle's counts
    client.force_login(people["stranger"])
    use_broker(closed_port_url())
    try:
        missed = client.post("/api/v1/agents/", {"package": example_zip(), "visibility": "public"})
    finally:
        use_broker(worker_env["CELERY_BROKER_URL"])
    assert missed.status_code == 201 and missed.json()["smoke_state"] == "pending"
    assert Agent.objects.get(name="example-agent").smoke_sent_at is None

    # A worker serving only the short jobs' queue, where smoke tests go.
    worker = start_worker(worker_env, tmp_path / "worker.log", worker_env["CELERY_QUEUE"], kinds=("-short",))
    try:
        sent = client.post("/api/v1/agents/", {"package": agent_zip(CRASHER), "visibility": "public"})
        assert sent.status_code == 201 and sent.json()["smoke_state"] == "pending"
        assert Agent.objects.get(name="crasher").smoke_sent_at is not None
        assert smokes_resend(resend_after_s=0) == [Agent.objects.get(name="example-agent").pk]
        pending = Agent.objects.filter(smoke_state=Agent.Smoke.PENDING)
        wait_for(lambda: not pending.exists(), 240, "both agents to be smoke-tested")
    finally:
        stop_worker(worker)

    states = client.get("/api/v1/agents/").json()["results"]
    found = {agent["name"]: agent["versions"][0] for agent in states}
    assert found["example-agent"]["smoke_state"] == "passed"
    assert found["crasher"]["smoke_state"] == "failed"
    assert "RuntimeError: missing weights: model.bin" in found["crasher"]["smoke_error"]
    assert b"runner.smoke_test" in (tmp_path / "worker.log").read_bytes()
