"""An agent author's account, in a real browser: sign up, out and in, make an API token, use it, revoke it."""

import json
import urllib.error
import urllib.request

import pytest
from django.contrib.auth import get_user_model

from core.shared_cache import counts_clear
from tests.factories import AgentFactory, RunFactory

pytestmark = pytest.mark.e2e

PASSWORD = "correct horse battery 9"


def api_get(url: str, key: str) -> tuple[int, dict]:
    """GET with the token and no cookies: the token alone says who asks."""
    request = urllib.request.Request(url, headers={"Authorization": f"Token {key}", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_visitor_signs_up_makes_a_token_uses_it_and_revokes_it(page, live_server, tiny_task):
    counts_clear()  # the sign-up and sign-in throttle counts in the shared cache
    page.goto(f"{live_server.url}/")
    page.click("header.top nav.account >> text=Sign up")
    page.fill("#id_username", "ada")
    page.fill("#id_email", "ada@example.org")
    page.fill("#id_password1", PASSWORD)
    page.fill("#id_password2", PASSWORD)
    page.click("form.account-form button[type=submit]")

    page.wait_for_selector("h1:text('ada')")
    assert page.locator("header.top a.username").inner_text() == "ada"
    ada = get_user_model().objects.get(username="ada")
    private = RunFactory(task_version=tiny_task, agent=AgentFactory(name="adas-agent", owner=ada, visibility="private"))

    page.click("header.top >> text=Sign out")
    page.wait_for_selector("header.top nav.account >> text=Sign in")
    page.click("header.top nav.account >> text=Sign in")
    page.fill("#id_username", "ada")
    page.fill("#id_password", PASSWORD)
    page.click("form.account-form button[type=submit]")
    page.wait_for_selector("h1:text('ada')")
    assert "adas-agent" in page.locator("table.agents").inner_text()

    page.fill("#id_name", "laptop")
    page.click("text=Create a token")
    key = page.locator("code.token-key").inner_text().strip()
    assert key.startswith("mlb_")
    assert "laptop" in page.locator("table.tokens").inner_text()

    status, runs = api_get(f"{live_server.url}/api/v1/runs/", key)
    assert status == 200 and private.pk in [run["id"] for run in runs["results"]]  # only ada may see it

    page.click("table.tokens >> text=Revoke")
    page.wait_for_selector("text=Token revoked")
    assert "laptop" not in page.locator("table.tokens").inner_text()
    status, refused = api_get(f"{live_server.url}/api/v1/runs/", key)
    assert status in (401, 403) and refused["detail"] == "Invalid or revoked token."
