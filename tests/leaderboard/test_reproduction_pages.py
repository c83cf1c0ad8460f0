"""A reproduction on the pages, the API and the exports: its verdict on its page and list, on its row of the
leaderboard (a word and a link), in the leaderboard's API and exports; the baseline's on the task page as noise."""

import pytest
from django.urls import reverse

from leaderboard.models import Reproduction
from leaderboard.services import reproduction_of_row
from runner.models import Run
from runner.throttles import RunRequestThrottle
from tests.factories import AgentFactory, RunFactory

ROW = {"agent__name": "solver", "agent__version": "1", "model": ""}


def make_row(version, agent, outcomes, settings):
    for succeeded, improvement in outcomes:
        RunFactory(
            task_version=version, agent=agent, succeeded=succeeded, improvement=improvement,
            sandbox=settings.BENCH_SANDBOX,
        )  # fmt: skip


def reproduce(by, key, outcomes):
    """A reproduction of ``key`` by ``by``, its runs ended with ``outcomes`` (succeeded, improvement), in order."""
    reproduction = reproduction_of_row(by=by, key=key)
    for run, (succeeded, improvement) in zip(reproduction.batch.runs.order_by("pk"), outcomes, strict=True):
        Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED, succeeded=succeeded, improvement=improvement)
    return reproduction


@pytest.fixture
def held(tiny_task_ready, people, settings):
    """solver@1 ran tiny 2/2; its reproduction ran it 2/2 too: it holds."""
    make_row(tiny_task_ready, AgentFactory(name="solver"), [(True, 0.5), (True, 0.4)], settings)
    return reproduce(people["staff"], ROW, [(True, 0.45), (True, 0.5)])


def test_the_reproduction_page_compares_the_sides_and_says_it_holds(client, held):
    html = client.get(reverse("leaderboard:reproduction_detail", args=[held.pk])).content.decode()

    assert "Verdict: holds" in html
    assert "Reproduction − original: +0.0 points</strong>\n        [-57.5, +56.4]" in html  # 2 runs a side: wide
    assert html.count("100.0% [34.2–100.0] n=2") == 4  # each side, on tiny and over all tasks
    assert "45.0% [-18.5, 108.5] n=2 / 47.5% [15.7, 79.3] n=2" in html  # mean improvements: original / reproduction


def test_a_reproduction_still_running_has_no_verdict_yet(client, tiny_task_ready, people, settings):
    make_row(tiny_task_ready, AgentFactory(name="solver"), [(True, 0.5), (True, 0.4)], settings)
    reproduction = reproduction_of_row(by=people["staff"], key=ROW)

    html = client.get(reverse("leaderboard:reproduction_detail", args=[reproduction.pk])).content.decode()
    assert "Verdict: approved, queued" in html


def test_the_list_and_the_leaderboard_row_show_the_verdict(client, held):
    listed = client.get(reverse("leaderboard:reproductions")).content.decode()
    assert '<td class="verdict">holds</td>' in listed

    board = client.get(reverse("leaderboard:leaderboard")).content.decode()
    assert f'href="{reverse("leaderboard:reproduction_detail", args=[held.pk])}"' in board
    assert ">holds</a>" in board


def test_the_api_and_the_exports_carry_the_verdict(client, held):
    (row,) = client.get("/api/v1/leaderboard/").json()
    assert row["reproduction"] == {"id": held.pk, "verdict": "holds", "exact": True}
    assert (
        client.get(reverse("leaderboard:leaderboard") + "?format=json").json()["rows"][0]["reproduction"]
        == (row["reproduction"])
    )
    csv_text = client.get(reverse("leaderboard:leaderboard") + "?format=csv").content.decode()
    assert f",{held.pk},holds,True," in csv_text

    body = client.get(f"/api/v1/reproductions/{held.pk}/").json()
    assert body["verdict"] == "holds" and body["exact"] is True and body["differences"] == []
    assert body["tasks"][0]["task"] == "tiny" and body["difference"]["interval"] == [
        pytest.approx(-0.575, abs=1e-3),
        pytest.approx(0.564, abs=1e-3),
    ]
    assert [r["id"] for r in client.get("/api/v1/reproductions/").json()] == [held.pk]


def test_the_api_starts_a_reproduction_for_staff_and_names_a_refusal(client, tiny_task_ready, people, settings):
    make_row(tiny_task_ready, AgentFactory(name="solver"), [(True, 0.5), (False, 0.0)], settings)
    assert client.post("/api/v1/reproductions/", {"row": "solver@1"}).status_code == 403
    client.force_login(people["staff"])

    made = client.post("/api/v1/reproductions/", {"row": "solver@1"}, content_type="application/json")
    assert made.status_code == 201 and made.json()["state"] == "approved"
    refused = client.post("/api/v1/reproductions/", {"row": "solver@1/gone"}, content_type="application/json")
    assert refused.status_code == 400 and "no counted run to reproduce" in refused.json()["detail"]


def test_the_form_starts_a_reproduction_and_shows_its_page(client, tiny_task_ready, people, settings):
    make_row(tiny_task_ready, AgentFactory(name="solver"), [(True, 0.5), (False, 0.0)], settings)
    client.force_login(people["staff"])

    response = client.post(reverse("leaderboard:reproduction_create"), {"row": "solver@1"}, follow=True)
    assert "Reproduction " in response.content.decode() and "runs queued" in response.content.decode()
    assert Run.objects.filter(purpose=Run.Purpose.REPRODUCTION).count() == 2


def test_a_private_agents_reproduction_is_hidden_from_strangers(client, tiny_task_ready, people, settings):
    agent = AgentFactory(name="solver", owner=people["owner"], visibility="private")
    make_row(tiny_task_ready, agent, [(True, 0.5), (True, 0.4)], settings)
    reproduction = reproduce(people["owner"], ROW, [])  # the owner's waits for staff: no run yet
    url = reverse("leaderboard:reproduction_detail", args=[reproduction.pk])

    client.force_login(people["stranger"])
    assert client.get(url).status_code == 404
    assert client.get("/api/v1/reproductions/").json() == []
    client.force_login(people["owner"])
    assert "waiting for approval" in client.get(url).content.decode().lower()


def test_the_baselines_reproduction_shows_the_tasks_noise_next_to_its_threshold(
    client, tiny_task_ready, people, settings
):
    baseline = AgentFactory(name="baseline", kind="builtin")
    make_row(tiny_task_ready, baseline, [(False, 0.0), (False, 0.02)], settings)
    reproduce(people["staff"], {**ROW, "agent__name": "baseline"}, [(False, -0.02), (True, 0.12)])

    html = client.get(reverse("leaderboard:task_detail", args=["tiny"])).content.decode()
    # improvements 0, 0.02, -0.02, 0.12: sd 0.0622 (twice it is above the 10% threshold)
    assert "improvement sd +6.2 points" in html and "over 4 baseline runs (-2.0 to +12.0)" in html
    assert "as large as the threshold: a success here can be noise" in html


def test_reproductions_are_requests_for_runs_and_share_their_rate(
    client, tiny_task_ready, people, settings, monkeypatch
):
    monkeypatch.setattr(RunRequestThrottle, "THROTTLE_RATES", {"run_requests": "1/hour"})
    make_row(tiny_task_ready, AgentFactory(name="solver"), [(True, 0.5), (False, 0.0)], settings)
    client.force_login(people["staff"])
    body = {"row": "solver@1"}

    assert client.post("/api/v1/reproductions/", body, content_type="application/json").status_code == 201
    assert client.post("/api/v1/reproductions/", body, content_type="application/json").status_code == 429
    page = client.post(reverse("leaderboard:reproduction_create"), body, follow=True)
    assert "too many requests for runs" in page.content.decode()
    assert Reproduction.objects.count() == 1


def test_staff_reproduce_a_run_from_its_page(client, tiny_task_ready, people, settings):
    run = RunFactory(task_version=tiny_task_ready, agent=AgentFactory(name="solver"), succeeded=True,
                     sandbox=settings.BENCH_SANDBOX)  # fmt: skip
    client.force_login(people["staff"])
    page = client.get(reverse("runner:run_detail", args=[run.pk])).content.decode()
    assert f'<input type="hidden" name="run" value="{run.pk}">' in page

    client.post(reverse("leaderboard:reproduction_create"), {"run": run.pk})
    (again,) = Run.objects.filter(purpose=Run.Purpose.REPRODUCTION)
    assert Reproduction.objects.get().source_run == run and again.task_version == run.task_version


def test_a_runs_reproduction_is_not_its_rows_verdict(client, held, people):
    run = held.original_runs.first()
    client.force_login(people["staff"])
    client.post(reverse("leaderboard:reproduction_create"), {"run": run.pk})  # one run: too few runs to say, later

    (row,) = client.get("/api/v1/leaderboard/").json()
    assert row["reproduction"]["id"] == held.pk


def test_the_list_compares_every_reproduction_in_the_same_few_queries_each_as_it_would_alone(client, held, people):
    """The list's and the API's comparisons are made for all the reproductions shown at once (four queries), not
    a few queries per reproduction; each is what it would be alone, the runs of one never counted to another."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from leaderboard.reproductions import reproduction_comparison, reproduction_comparisons
    from leaderboard.services import reproduction_of_run

    client.force_login(people["staff"])
    pages = (reverse("leaderboard:reproductions"), "/api/v1/reproductions/")
    alone = []
    for url in pages:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        alone.append(len(queries))
    failing = reproduce(people["staff"], ROW, [(False, 0.0), (False, 0.01)])
    first = Run.objects.filter(agent__name="solver", batch__isnull=True).order_by("pk").first()
    one_run = reproduction_of_run(by=people["staff"], run=first)
    together = []
    for url in pages:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        together.append(len(queries))

    assert together == alone
    shown = list(Reproduction.objects.filter(pk__in=[held.pk, failing.pk, one_run.pk]))
    assert reproduction_comparisons(shown) == {r.pk: reproduction_comparison(r) for r in shown}
    verdicts = {pk: c["verdict"] for pk, c in reproduction_comparisons(shown).items()}
    assert verdicts[held.pk] == "holds" and verdicts[one_run.pk] == "approved, queued"
    assert reproduction_comparisons(shown)[one_run.pk]["original"]["runs"] == 1
