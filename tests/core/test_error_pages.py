"""The 404 page says what is missing in words, never an exception's class name; the API answers JSON."""

import pytest


@pytest.mark.django_db
def test_a_url_no_view_matches_says_nothing_is_there_without_naming_an_exception(client):
    answer = client.get("/no-such-page/")
    page = answer.content.decode()
    assert answer.status_code == 404
    assert "There is nothing at <code>/no-such-page/</code>." in page and "Resolver404" not in page


@pytest.mark.django_db
def test_a_missing_object_says_what_is_missing(client):
    page = client.get("/tasks/no-such-task/").content.decode()
    assert "There is nothing at <code>/tasks/no-such-task/</code>: no task no-such-task." in page


@pytest.mark.django_db
def test_the_api_answers_json(client):
    answer = client.get("/api/v1/no-such-thing/")
    assert (answer.status_code, answer.json()) == (404, {"detail": "Not found."})


@pytest.mark.django_db
def test_a_staff_page_sends_a_signed_out_visitor_to_the_sites_sign_in_and_refuses_others(client, django_user_model):
    answer = client.get("/workers/")
    assert answer.status_code == 302 and answer.url == "/account/login/?next=/workers/"  # not the admin's
    client.force_login(django_user_model.objects.create_user("someone", password="x"))
    assert client.get("/workers/").status_code == 403
