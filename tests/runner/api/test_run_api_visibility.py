"""The runs API follows the pages' access rule: a private agent's runs and steps are listed and found only for its
owner and staff; to anyone else they are a 404, as if they did not exist."""


def test_the_runs_api_lists_a_private_agents_runs_only_to_its_owner_and_staff(viewer, private_run, public_run):
    listed = {r["id"]: r["agent"] for r in viewer.client.get("/api/v1/runs/").json()["results"]}

    assert listed.get(public_run.pk) == "open-book"
    assert (private_run.pk in listed) == viewer.may_see


def test_filtering_the_runs_api_by_a_private_agent_finds_nothing_for_others(viewer, private_run):
    found = viewer.client.get("/api/v1/runs/", {"agent": "hidden-hand"}).json()

    assert found["count"] == (1 if viewer.may_see else 0)


def test_a_private_agents_run_in_the_api_is_a_404_to_anyone_but_its_owner_and_staff(viewer, private_run):
    response = viewer.client.get(f"/api/v1/runs/{private_run.pk}/")

    assert response.status_code == (200 if viewer.may_see else 404)
    if viewer.may_see:
        assert response.json()["agent"] == "hidden-hand"


def test_a_private_agents_steps_in_the_api_are_a_404_to_anyone_but_its_owner_and_staff(viewer, private_run):
    response = viewer.client.get(f"/api/v1/runs/{private_run.pk}/steps/")

    assert response.status_code == (200 if viewer.may_see else 404)
    if viewer.may_see:
        assert response.json()["results"][0]["observation"] == "notes.txt written"
