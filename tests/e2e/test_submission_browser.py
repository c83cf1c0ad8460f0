"""The whole way of an agent author, in Chromium with a real Celery worker: a new user signs up, uploads the
example agent, asks for runs on a small task, staff approve them in the browser, the worker executes them, and the
agent's row appears on the leaderboard (which counts verified runs only), its runs marked verified."""

import zipfile
from pathlib import Path

import pytest
from django.test import Client

from core.shared_cache import counts_clear
from runner.models import Batch, Run
from tests.integration.conftest import celery_worker_process, redis_broker, worker_env  # noqa: F401 - fixtures
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "example-agent"
PASSWORD = "correct horse battery 9"


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("celery_worker_process")
def test_a_new_user_uploads_asks_for_runs_staff_approve_and_the_agent_is_ranked_verified(
    page, browser, live_server, tiny_task, django_user_model, tmp_path, settings
):
    settings.BENCH_SANDBOX = "bwrap"
    counts_clear()  # sign-up, upload and request throttles count in the shared cache
    package = tmp_path / "example-agent.zip"
    with zipfile.ZipFile(package, "w") as archive:
        for path in EXAMPLE.iterdir():
            archive.write(path, f"example-agent/{path.name}")

    # A visitor signs up.
    page.goto(f"{live_server.url}/")
    page.click("header.top nav.account >> text=Sign up")
    page.fill("#id_username", "grace")
    page.fill("#id_email", "grace@example.org")
    page.fill("#id_password1", PASSWORD)
    page.fill("#id_password2", PASSWORD)
    page.click("form.account-form button[type=submit]")
    page.wait_for_selector("header.top a.username:text('grace')")

    # ... uploads the example agent; the worker smoke-tests it in the sandbox while its page waits ...
    page.goto(f"{live_server.url}/agents/")
    page.click("text=Upload an agent")
    page.set_input_files("input[name=package]", str(package))
    page.click("form.agent-upload button[type=submit]")
    page.wait_for_url(f"{live_server.url}/agents/example-agent/")
    page.wait_for_selector("table.agent-versions td.smoke-passed", timeout=120_000)

    # ... and asks for runs of it on the tiny task, from its page.
    form = page.locator("form.run-request")
    form.locator("input[name=tasks]").locator("xpath=..").filter(has_text="Tiny").locator("input").check()
    form.locator("input[name=repeats]").fill("2")
    form.locator("button[name=submit-request]").click()
    page.wait_for_selector(".messages >> text=waits for staff to approve it")
    submission = Batch.objects.get(agent__name="example-agent")
    row = page.locator(f"table.submissions tr[data-submission='{submission.pk}']")
    assert row.locator(".submission-state").inner_text() == "Smoke-tested, waiting for approval"
    assert not Run.objects.filter(agent__name="example-agent").exists()

    # Staff see it waiting, from the header, and approve it.
    staff = django_user_model.objects.create_user("curator", password="x", is_staff=True)
    client = Client()
    client.force_login(staff)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    staff_context = browser.new_context()
    staff_context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
    staff_page = staff_context.new_page()
    try:
        staff_page.goto(f"{live_server.url}/")
        staff_page.click("header.top a.pending-submissions")
        staff_page.locator(f"tr[data-submission='{submission.pk}'] button[name=approve]").click()
        staff_page.wait_for_selector(".messages >> text=2 run(s) of example-agent@1 queued")
        assert staff_page.locator("header.top a.pending-submissions").count() == 0
    finally:
        staff_context.close()

    # The worker executes them (the tiny task's baseline is measured first).
    runs = Run.objects.filter(batch=submission)
    assert runs.count() == 2
    wait_for(lambda: all(r.has_ended for r in runs.all()), 420, "the submission's runs to end")
    assert [(r.status, r.origin, r.final_score) for r in runs.all()] == [("finished", "executed", 2.0)] * 2, [
        (r.status, r.error) for r in runs.all()
    ]
    assert all(r.worker.startswith("test-") for r in runs.all())  # executed by the worker process, not in here

    # The submitter sees it done; the leaderboard ranks the agent on its verified runs.
    page.goto(f"{live_server.url}/agents/example-agent/")
    assert row.locator(".submission-state").inner_text() == "Done"
    page.goto(f"{live_server.url}/leaderboard/")
    assert "Only verified runs count" in page.locator("main").inner_text()
    board_row = page.locator("table.leaderboard tbody tr").filter(has_text="example-agent@1")
    assert board_row.count() == 1
    board_row.locator("td.num a").first.click()  # its runs
    page.wait_for_selector("table")
    listed = page.locator("tbody tr").filter(has_text="example-agent")
    assert listed.count() == 2 and listed.locator(".badge.verified").count() == 2
