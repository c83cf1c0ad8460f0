"""The leaderboard page and the task page with no runs, one run and many: each states what it knows and no more."""

import json

from django.urls import reverse

from tests.factories import AgentFactory, RunFactory

BOARD = reverse("leaderboard:leaderboard")


def _table(html: str) -> str:
    return html.split('<table class="leaderboard">', 1)[1].split("</table>", 1)[0]


def test_with_no_runs_the_pages_say_so_and_draw_no_chart(client, tiny_task):
    html = client.get(BOARD).content.decode()
    assert "No benchmark runs have ended yet." in _table(html) and 'id="figure-success-by-task"' not in html
    assert client.get(BOARD + "?format=csv").content.decode().count("\n") == 1  # the header only

    task_page = client.get(reverse("leaderboard:task_detail", args=["tiny"])).content.decode()
    assert "No benchmark runs of this version yet." in task_page


def test_with_one_run_the_rate_is_given_with_its_wide_interval_and_no_mean_interval(client, tiny_task):
    RunFactory(task_version=tiny_task, agent=AgentFactory(name="once"), succeeded=True, improvement=0.25)

    table = _table(client.get(BOARD).content.decode())

    assert "100.0% [20.7–100.0] n=1" in table  # one success says the rate is somewhere above 20.7%
    assert "25.0% n=1" in table and "25.0% [" not in table  # one value has no spread, so no interval


def test_with_many_runs_the_interval_narrows(client, tiny_task):
    agent = AgentFactory(name="often")
    for i in range(40):
        RunFactory(task_version=tiny_task, agent=agent, succeeded=i % 4 == 0, improvement=0.1)

    table = _table(client.get(BOARD).content.decode())

    assert "25.0% [14.2–40.2] n=40" in table  # 10 of 40


def test_with_no_runs_the_headers_still_sort_and_no_chart_is_drawn(client, tiny_task):
    html = client.get(BOARD + "?sort=-mean_cost").content.decode()

    assert "No benchmark runs have ended yet." in _table(html) and 'aria-sort="descending"' in html
    assert 'id="figure-improvements"' not in html and 'id="figure-cost-vs-success"' not in html
    task_page = client.get(reverse("leaderboard:task_detail", args=["tiny"])).content.decode()
    assert 'id="figure-task-scores"' not in task_page


def test_with_one_run_each_chart_has_its_one_point(client, tiny_task):
    RunFactory(task_version=tiny_task, agent=AgentFactory(name="once"), succeeded=True, improvement=0.25, final_score=3)

    html = client.get(BOARD).content.decode()
    task_page = client.get(reverse("leaderboard:task_detail", args=["tiny"])).content.decode()

    assert '"y": [25.0]' in html.split('id="figure-improvements"', 1)[1].split("</script>", 1)[0]
    assert '"y": [3.0]' in task_page.split('id="figure-task-scores"', 1)[1].split("</script>", 1)[0]


def test_with_many_runs_every_scored_run_is_a_point_and_sorting_keeps_every_row(client, tiny_task):
    for name in ("often", "seldom"):
        agent = AgentFactory(name=name)
        for i in range(40):
            RunFactory(task_version=tiny_task, agent=agent, succeeded=i % 4 == 0, improvement=i / 100)

    html = client.get(BOARD + "?sort=agent").content.decode()

    figure = json.loads(html.split('id="figure-improvements" type="application/json">', 1)[1].split("</script>", 1)[0])
    assert {box["name"]: sorted(box["y"]) for box in figure["data"]} == {
        "often@1": [float(i) for i in range(40)],
        "seldom@1": [float(i) for i in range(40)],
    }
    table, by_task = _table(html), html.split('id="board-by-task"', 1)[1].split("</table>", 1)[0]
    assert table.index("<strong>often</strong>") < table.index("<strong>seldom</strong>")
    assert by_task.index("<strong>often</strong>") < by_task.index("<strong>seldom</strong>")  # the same order
    assert table.count("25.0% [14.2–40.2] n=40") == 2 and by_task.count("25.0% [14.2–40.2] n=40") == 2
