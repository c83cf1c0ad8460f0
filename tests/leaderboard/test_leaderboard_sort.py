"""The leaderboard's rows sorted by any column, on the server: ?sort=COLUMN ascending, ?sort=-COLUMN descending, a
row without a figure there last either way; a header's link asks for it, and an htmx request gets the table alone.
The CSV, the JSON and the API give the rows in the same order."""

import csv
import io
import re
from decimal import Decimal

import pytest
from django.urls import reverse

from tests.factories import AgentFactory, RunFactory

URL = reverse("leaderboard:leaderboard")


@pytest.fixture
def board(tiny_task):
    """Three rows: "best" succeeds most but costs most, "cheap" costs nothing and never succeeds, "middle" is
    between; "cheap" has no improvement (its runs were never scored)."""
    for name, outcomes, cost, improvement in [
        ("best", [True, True], "0.09", 0.5),
        ("middle", [True, False], "0.02", 0.1),
        ("cheap", [False, False, False], "0", None),
    ]:
        agent = AgentFactory(name=name)
        for succeeded in outcomes:
            RunFactory(
                task_version=tiny_task, agent=agent, succeeded=succeeded, improvement=improvement, cost=Decimal(cost)
            )


def _order(html: str) -> list[str]:
    """The agents of the table's rows, top to bottom."""
    table = html.split('id="board-table"', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<td><strong>([^<]+)</strong>@", table)


def _page(client, query: str = "", **headers) -> str:
    return client.get(URL + query, headers=headers).content.decode()


def test_without_a_sort_the_rows_are_ranked(client, board):
    assert _order(_page(client)) == ["best", "middle", "cheap"]


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("mean_cost", ["cheap", "middle", "best"]),
        ("-mean_cost", ["best", "middle", "cheap"]),
        ("runs", ["best", "middle", "cheap"]),  # 2 and 2 tie: the ranking decides
        ("-runs", ["cheap", "best", "middle"]),
        ("success_rate", ["cheap", "middle", "best"]),
        ("agent", ["best", "cheap", "middle"]),
        ("-agent", ["middle", "cheap", "best"]),
        ("task:tiny", ["cheap", "middle", "best"]),
        ("-task:tiny", ["best", "middle", "cheap"]),
    ],
)
def test_the_rows_follow_the_sort_asked_for(client, board, sort, expected):
    assert _order(_page(client, f"?sort={sort}")) == expected


@pytest.mark.parametrize("sort", ["mean_improvement", "-mean_improvement"])
def test_a_row_without_a_figure_in_the_sorted_column_comes_last_either_way(client, board, sort):
    assert _order(_page(client, f"?sort={sort}"))[-1] == "cheap"


def test_an_unknown_sort_is_named_and_the_rows_are_ranked(client, board):
    html = _page(client, "?sort=-bogus")

    assert "Unknown sort" in html and "&#x27;-bogus&#x27;" in html
    assert _order(html) == ["best", "middle", "cheap"]


def test_a_headers_link_asks_for_its_column_then_the_other_direction(client, board):
    first = _page(client)
    assert 'href="?sort=mean_cost"' in first and 'href="?sort=-success_rate"' in first  # cheaper, higher first

    sorted_by_cost = _page(client, "?sort=mean_cost")
    assert 'href="?sort=-mean_cost"' in sorted_by_cost and 'aria-sort="ascending"' in sorted_by_cost


def test_a_header_link_keeps_the_filters_and_swaps_the_table_with_htmx_pushing_the_url(client, board):
    html = _page(client, "?versions=all&category=canonical")
    link = re.search(r'<a class="sort" href="([^"]*)" hx-get="([^"]*)"[^>]*>Mean cost</a>', html)

    assert link and link[1] == link[2] == "?versions=all&amp;category=canonical&amp;sort=mean_cost"
    anchor = link[0]
    assert 'hx-target="#board-table"' in anchor and 'hx-swap="outerHTML"' in anchor and 'hx-push-url="true"' in anchor


def test_an_htmx_request_gets_the_sorted_table_alone(client, board):
    response = client.get(URL + "?sort=mean_cost", headers={"HX-Request": "true"})
    html = response.content.decode()

    assert html.lstrip().startswith('<div id="board-table">')
    assert "<html" not in html and "figure-success-by-task" not in html
    assert _order(html) == ["cheap", "middle", "best"]
    assert "HX-Request" in response["Vary"]  # a cache keeps the fragment and the page apart


def test_a_history_restore_gets_the_whole_page(client, board):
    html = _page(client, "?sort=mean_cost", HX_Request="true", HX_History_Restore_Request="true")

    assert "<html" in html and _order(html) == ["cheap", "middle", "best"]


def test_the_exports_and_the_api_give_the_rows_in_the_sorted_order(client, board):
    csv_rows = csv.DictReader(io.StringIO(client.get(URL + "?format=csv&sort=mean_cost").content.decode()))
    json_rows = client.get(URL + "?format=json&sort=mean_cost").json()
    api_rows = client.get(reverse("api-leaderboard") + "?sort=mean_cost").json()

    assert [r["agent"] for r in csv_rows] == ["cheap", "middle", "best"]
    assert [r["agent"] for r in json_rows["rows"]] == ["cheap", "middle", "best"] and json_rows["sort"] == "mean_cost"
    assert [r["agent"] for r in api_rows] == ["cheap", "middle", "best"]


def test_the_api_answers_an_unknown_sort_with_a_400_naming_it(client, board):
    response = client.get(reverse("api-leaderboard") + "?sort=cost")

    assert response.status_code == 400 and "got 'cost'" in response.json()["sort"][0]
