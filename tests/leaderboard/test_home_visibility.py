"""The home page counts and lists a private agent's runs only for its owner and staff."""

from django.urls import reverse


def test_the_home_page_counts_and_lists_a_private_agents_runs_only_for_its_owner_and_staff(
    viewer, private_run, public_run
):
    html = viewer.client.get(reverse("leaderboard:home")).content.decode()

    runs, succeeded = (2, 1) if viewer.may_see else (1, 0)
    assert f"<strong>{runs}</strong> runs counted" in html
    assert f"<strong>{succeeded}</strong> succeeded" in html
    assert reverse("runner:run_detail", args=[public_run.pk]) in html
    assert (reverse("runner:run_detail", args=[private_run.pk]) in html) == viewer.may_see
