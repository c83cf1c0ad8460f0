"""A signed-in submitter uploads the example agent on the site, in a real browser, and lands on its page at once;
the page shows its smoke test waiting, then passed when a real worker has run it (the versions table polls)."""

import zipfile
from pathlib import Path

import pytest
from django.test import Client

from core.shared_cache import counts_clear
from tests.integration.conftest import celery_worker_process, redis_broker, worker_env  # noqa: F401 - fixtures

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "example-agent"


def signed_in(page, live_server, user, session_cookie: str) -> None:
    """Give the browser the session of ``user`` (as signing in would)."""
    client = Client()
    client.force_login(user)
    cookie = client.cookies[session_cookie]
    page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])


@pytest.mark.usefixtures("celery_worker_process")
def test_a_submitter_uploads_the_example_agent_and_its_page_shows_the_smoke_test_as_the_worker_runs_it(
    page, live_server, django_user_model, tmp_path, settings
):
    settings.BENCH_SANDBOX = "bwrap"
    counts_clear()  # the upload throttle counts in the shared cache
    submitter = django_user_model.objects.create_user("ada", password="x")
    signed_in(page, live_server, submitter, settings.SESSION_COOKIE_NAME)

    # From the account page to the upload page, where the example agent is offered as the zip to upload.
    page.goto(f"{live_server.url}/account/")
    page.click("main >> text=Upload an agent")
    with page.expect_download() as download:
        page.click("a.example-agent")
    package = tmp_path / "example-agent.zip"
    download.value.save_as(package)
    with zipfile.ZipFile(package) as archive:
        assert sorted(archive.namelist()) == sorted(f"example-agent/{p.name}" for p in EXAMPLE.iterdir())
    page.set_input_files("input[name=package]", str(package))
    page.fill("textarea[name=description]", "Ada's first agent.")
    page.click("form.agent-upload button[type=submit]")

    page.wait_for_url(f"{live_server.url}/agents/example-agent/")
    assert page.locator("h1.agent-name").inner_text() == "example-agent"
    assert "example-agent@1 uploaded: its smoke test waits for a worker" in page.locator(".messages").inner_text()
    page.wait_for_selector("table.agent-versions td.smoke-passed", timeout=120_000)  # without a reload
    assert page.locator(".messages").count() == 1  # the same page: only the table was swapped
    assert page.locator(".agent-owner").inner_text() == "ada"
    assert "Ada's first agent." in page.locator("main").inner_text()
    assert page.locator("table.agent-versions tbody tr").count() == 1
