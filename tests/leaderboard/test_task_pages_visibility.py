"""Task pages count and list a private agent's runs only for its owner and staff: the task list's run count and
best score, the task page's ranking and its recent runs."""

from django.urls import reverse


def test_the_task_list_counts_a_private_agents_runs_and_best_score_only_for_its_owner_and_staff(
    viewer, private_run, public_run
):
    html = viewer.client.get(reverse("leaderboard:task_list")).content.decode()
    row = html.split('<span class="muted">tiny</span>', 1)[1].split("</tr>", 1)[0]

    if viewer.may_see:
        assert '<td class="num">9.0000</td>' in row and '<td class="num">2</td>' in row
    else:
        assert '<td class="num">1.0000</td>' in row and '<td class="num">1</td>' in row


def test_the_task_page_ranks_and_lists_a_private_agents_runs_only_for_its_owner_and_staff(
    viewer, private_run, public_run
):
    html = viewer.client.get(reverse("leaderboard:task_detail", args=["tiny"])).content.decode()
    ranking, recent = html.split("<h2>Leaderboard", 1)[1].split("<h2>Recent runs", 1)

    assert "open-book@1" in ranking and reverse("runner:run_detail", args=[public_run.pk]) in recent
    assert ("hidden-hand@1" in ranking) == viewer.may_see
    assert (reverse("runner:run_detail", args=[private_run.pk]) in recent) == viewer.may_see
