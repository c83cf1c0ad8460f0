"""Run pages show a private agent's runs and steps only to its owner and staff; to anyone else a hidden run is a
404, as if it did not exist. Public agents' runs are shown to everyone, anonymous visitors included."""

from django.urls import reverse


def test_the_runs_list_shows_a_private_agents_runs_only_to_its_owner_and_staff(viewer, private_run, public_run):
    html = viewer.client.get(reverse("runner:run_list")).content.decode()

    assert "open-book" in html and reverse("runner:run_detail", args=[public_run.pk]) in html
    assert ("hidden-hand" in html) == viewer.may_see
    assert (reverse("runner:run_detail", args=[private_run.pk]) in html) == viewer.may_see


def test_filtering_the_runs_list_by_a_private_agent_finds_nothing_for_others(viewer, private_run):
    html = viewer.client.get(reverse("runner:run_list"), {"agent": "hidden-hand"}).content.decode()

    assert (reverse("runner:run_detail", args=[private_run.pk]) in html) == viewer.may_see
    assert ("No runs match these filters." in html) != viewer.may_see


def test_a_private_agents_run_page_is_a_404_to_anyone_but_its_owner_and_staff(viewer, private_run):
    url = reverse("runner:run_detail", args=[private_run.pk])

    page = viewer.client.get(url)
    fragment = viewer.client.get(url, headers={"HX-Request": "true"})

    assert page.status_code == fragment.status_code == (200 if viewer.may_see else 404)
    assert ("notes.txt written" in page.content.decode()) == viewer.may_see


def test_a_hidden_run_answers_like_a_run_that_does_not_exist(client, private_run):
    hidden = client.get(reverse("runner:run_detail", args=[private_run.pk]))
    missing = client.get(reverse("runner:run_detail", args=[private_run.pk + 1000]))

    assert hidden.status_code == missing.status_code == 404
    assert "hidden-hand" not in hidden.content.decode()


def test_a_private_agents_trace_download_is_a_404_to_anyone_but_its_owner_and_staff(viewer, private_run):
    response = viewer.client.get(reverse("runner:run_trace_json", args=[private_run.pk]))

    assert response.status_code == (200 if viewer.may_see else 404)
    if viewer.may_see:
        assert response.json()["steps"][0]["observation"] == "notes.txt written"


def test_a_private_agents_step_changes_are_a_404_to_anyone_but_its_owner_and_staff(viewer, private_run):
    response = viewer.client.get(reverse("runner:step_changes", args=[private_run.pk, 0]))

    assert response.status_code == (200 if viewer.may_see else 404)
    assert ("the secret plan" in response.content.decode()) == viewer.may_see


def test_a_private_agents_step_files_are_a_404_to_anyone_but_its_owner_and_staff(viewer, private_run):
    url = reverse("runner:step_files", args=[private_run.pk, 0])

    listing = viewer.client.get(url)
    one_file = viewer.client.get(url, {"path": "notes.txt"})

    assert listing.status_code == one_file.status_code == (200 if viewer.may_see else 404)
    assert ("notes.txt" in listing.content.decode()) == viewer.may_see
    assert ("the secret plan" in one_file.content.decode()) == viewer.may_see


def test_a_public_agents_run_and_steps_are_shown_to_anonymous_visitors(client, public_run):
    from tests.factories import StepFactory

    StepFactory(run=public_run, index=0)

    assert client.get(reverse("runner:run_detail", args=[public_run.pk])).status_code == 200
    assert client.get(reverse("runner:run_trace_json", args=[public_run.pk])).status_code == 200
    assert client.get(reverse("runner:step_changes", args=[public_run.pk, 0])).status_code == 200
    assert client.get(reverse("runner:step_files", args=[public_run.pk, 0])).status_code == 200


def test_an_operators_export_log_still_writes_a_private_agents_run(private_run, capsys):
    from django.core.management import call_command

    call_command("export_log", str(private_run.pk), "-")

    assert "notes.txt written" in capsys.readouterr().out


def test_the_access_rule_on_agents_themselves_shows_a_private_agent_only_to_its_owner_and_staff(
    people, private_agent, public_run
):
    from django.contrib.auth.models import AnonymousUser

    from runner.models import Agent
    from runner.selectors import agents_visible_filter

    for who, viewer in [("anonymous", AnonymousUser()), *people.items(), ("operator", None)]:
        names = set(Agent.objects.filter(agents_visible_filter(viewer)).values_list("name", flat=True))
        assert "open-book" in names
        assert ("hidden-hand" in names) == (who in ("owner", "staff", "operator")), who
