"""Numbers out of range and NUL bytes are refused with a 400 that says what was wrong, never a 500."""

import pytest

from tests.factories import RunFactory, StepFactory

HUGE = "160602351368562754882598076416"


@pytest.fixture
def urls(tiny_task):
    run = RunFactory(task_version=tiny_task)
    StepFactory(run=run, index=0)
    return ["/api/v1/tasks/", "/api/v1/runs/", f"/api/v1/runs/{run.pk}/steps/"]


@pytest.mark.parametrize(
    ("param", "value", "expected"),
    [
        ("limit", HUGE, "expected a whole number from 1 to 500"),
        ("limit", "501", "expected a whole number from 1 to 500"),
        ("limit", "0", "expected a whole number from 1 to 500"),
        ("limit", "null", "expected a whole number from 1 to 500, got 'null'"),
        ("limit", "", "expected a whole number from 1 to 500"),
        ("offset", HUGE, "expected a whole number from 0 to 1000000000"),
        ("offset", "-1", "expected a whole number from 0 to 1000000000"),
        ("offset", "1e3", "expected a whole number from 0 to 1000000000"),
    ],
)
def test_a_limit_or_offset_out_of_range_is_a_400_naming_the_parameter(client, urls, param, value, expected):
    for url in urls:
        response = client.get(url, {param: value})
        assert response.status_code == 400, url
        assert response["Content-Type"] == "application/json"
        assert expected in response.json()[param][0]


def test_a_limit_within_bounds_pages_the_list(client, urls):
    for url in urls:
        page = client.get(url, {"limit": "500", "offset": "0"}).json()
        assert page["count"] == 1 and len(page["results"]) == 1
        assert client.get(url, {"limit": "1", "offset": "1000000000"}).json()["results"] == []


@pytest.mark.parametrize(
    "url",
    ["/api/v1/runs/?task=%00", "/api/v1/runs/?agent=a%00b", "/api/v1/tasks/%00/", "/api/v1/runs/?x%00=1"],
)
def test_a_nul_byte_in_the_api_is_a_json_400(client, db, url):
    response = client.get(url)
    assert response.status_code == 400
    assert "NUL byte" in response.json()["detail"]


@pytest.mark.parametrize("url", ["/runs/?task=%00", "/runs/?agent=%00", "/tasks/%00/"])
def test_a_nul_byte_in_a_page_is_a_400_page(client, db, url):
    response = client.get(url)
    assert response.status_code == 400
    assert "<h1>Bad request</h1>" in response.content.decode() and "NUL byte" in response.content.decode()


@pytest.mark.parametrize(
    ("url", "param", "expected"),
    [
        ("/api/v1/leaderboard/?versions=AAA", "versions", "expected 'current' or 'all', got 'AAA'"),
        ("/api/v1/runs/?status=bogus", "status", "expected one of queued, preparing"),
        ("/api/v1/runs/?status=", "status", "expected one of queued, preparing"),
    ],
)
def test_a_value_outside_a_parameters_choices_is_a_400_naming_them(client, db, url, param, expected):
    response = client.get(url)
    assert response.status_code == 400
    assert expected in response.json()[param][0]


def test_an_api_url_that_matches_nothing_is_a_json_404(client, db):
    response = client.get("/api/v1/nothing/here/")
    assert response.status_code == 404 and response.json() == {"detail": "Not found."}
    assert "<h1>Not found</h1>" in client.get("/nowhere/").content.decode()  # pages keep the site's 404 page
