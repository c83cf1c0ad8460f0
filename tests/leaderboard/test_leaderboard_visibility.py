"""Rankings count a private agent's runs only for its owner and staff: to anyone else its row, its cells, its
points on the charts and its row in the API are not there, and the public agents rank as if it did not exist."""

from django.urls import reverse


def test_the_leaderboard_page_ranks_a_private_agent_only_for_its_owner_and_staff(viewer, private_run, public_run):
    html = viewer.client.get(reverse("leaderboard:leaderboard")).content.decode()
    table, charts = html.split('<div class="charts">', 1)

    assert "open-book" in table and "open-book" in charts
    assert ("hidden-hand" in table) == viewer.may_see  # its row and its cells
    assert ("hidden-hand" in charts) == viewer.may_see  # its bars and its point
    assert ("100.0% [20.7–100.0] n=1" in table) == viewer.may_see  # its success rate, the only one above 0%


def test_the_leaderboard_api_ranks_a_private_agent_only_for_its_owner_and_staff(viewer, private_run, public_run):
    rows = {r["agent"]: r for r in viewer.client.get("/api/v1/leaderboard/").json()}

    assert rows["open-book"]["runs"] == 1
    assert ("hidden-hand" in rows) == viewer.may_see
    if viewer.may_see:
        assert list(rows) == ["hidden-hand", "open-book"] and rows["hidden-hand"]["success_rate"] == 1.0
