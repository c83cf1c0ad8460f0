"""Accounts: signing up, in and out, passwords, roles, the account page and its API tokens, throttling."""

from __future__ import annotations

import hashlib
import re
from importlib import import_module

import pytest
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Group
from django.contrib.auth.signals import user_login_failed
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.models import ApiToken
from accounts.services import TOKENS_PER_USER_MAX, token_create
from core.roles import REVIEWER_GROUP, is_reviewer, is_staff, roles_of
from core.shared_cache import counts_clear
from tests.factories import AgentFactory, RunFactory

User = get_user_model()
PASSWORD = "correct horse battery 9"


@pytest.fixture(autouse=True)
def fresh_throttle(db):
    """The throttle counts in the shared cache: each test starts with no attempts counted."""
    counts_clear()
    yield
    counts_clear()


def signup(client, username="ada", email="ada@example.org", password=PASSWORD, password2=None, **extra):
    return client.post(
        reverse("accounts:signup"),
        {"username": username, "email": email, "password1": password, "password2": password2 or password},
        **extra,
    )


def signin(client, username="ada", password=PASSWORD, **extra):
    return client.post(reverse("accounts:login"), {"username": username, "password": password}, **extra)


# --- Signing up, in and out ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_visitor_signs_up_and_is_signed_in_as_a_submitter(client):
    home = client.get(reverse("leaderboard:home")).content.decode()
    assert 'href="/account/login/"' in home and 'href="/account/signup/"' in home

    response = signup(client)

    assert response.status_code == 302 and response.url == reverse("accounts:account")
    user = User.objects.get(username="ada")
    assert user.email == "ada@example.org" and user.check_password(PASSWORD)
    assert not user.is_staff and not user.groups.exists()
    page = client.get(reverse("accounts:account")).content.decode()
    assert 'class="username">ada</a>' in page and "Sign out" in page and 'href="/account/signup/"' not in page
    assert re.search(r'class="roles">visitor, submitter<', page)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "fields, error",
    [
        ({"password2": "something else 9"}, "The two password fields"),
        ({"email": "not-an-address"}, "Enter a valid email address"),
        ({"password": "123", "password2": "123"}, "This password is too short"),
        ({"username": "bad name!"}, "Enter a valid username"),
    ],
)
def test_a_bad_sign_up_names_what_is_wrong_and_creates_nobody(client, fields, error):
    response = signup(client, **fields)

    assert response.status_code == 400
    assert error in response.content.decode()
    assert not User.objects.exists()
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_one_account_per_email_address_and_per_username(client):
    User.objects.create_user("ada", email="Ada@Example.org", password="x")

    same_email = signup(client, username="grace", email="ada@example.ORG")
    same_name = signup(client, username="ada", email="other@example.org")

    assert same_email.status_code == 400 and "An account with this email address exists" in same_email.content.decode()
    assert same_name.status_code == 400 and "A user with that username already exists" in same_name.content.decode()
    assert User.objects.count() == 1


@pytest.mark.django_db
def test_sign_in_and_sign_out(client):
    User.objects.create_user("ada", email="ada@example.org", password=PASSWORD)

    wrong = signin(client, password="not it")
    assert wrong.status_code == 200 and "Please enter a correct username and password" in wrong.content.decode()
    assert "_auth_user_id" not in client.session

    right = signin(client)
    assert right.status_code == 302 and right.url == reverse("accounts:account")
    assert client.get(reverse("accounts:account")).status_code == 200

    assert client.get(reverse("accounts:logout")).status_code == 405  # signing out is a POST (no CSRF by a link)
    assert "_auth_user_id" in client.session
    out = client.post(reverse("accounts:logout"))
    assert out.status_code == 302 and out.url == reverse("leaderboard:home")
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_sign_in_goes_back_to_the_page_that_asked_for_it(client):
    User.objects.create_user("ada", password=PASSWORD)

    asked = client.get(reverse("accounts:account"))
    assert asked.status_code == 302 and asked.url == f"{reverse('accounts:login')}?next=/account/"
    response = client.post(asked.url, {"username": "ada", "password": PASSWORD, "next": "/runs/"})
    assert response.url == "/runs/"


# --- Passwords ---------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_password_change_needs_the_old_password(client):
    user = User.objects.create_user("ada", password=PASSWORD)
    client.force_login(user)
    url = reverse("accounts:password_change")
    new = "a brand new secret 7"

    wrong = client.post(url, {"old_password": "guess", "new_password1": new, "new_password2": new})
    assert wrong.status_code == 200 and "Your old password was entered incorrectly" in wrong.content.decode()
    user.refresh_from_db()
    assert user.check_password(PASSWORD)

    right = client.post(url, {"old_password": PASSWORD, "new_password1": new, "new_password2": new})
    assert right.status_code == 302 and right.url == reverse("accounts:password_change_done")
    user.refresh_from_db()
    assert user.check_password(new)
    assert client.get(reverse("accounts:account")).status_code == 200  # still signed in


@pytest.mark.django_db
def test_password_reset_by_email(client):
    user = User.objects.create_user("ada", email="ada@example.org", password=PASSWORD)

    sent = client.post(reverse("accounts:password_reset"), {"email": "ADA@example.org"})
    assert sent.status_code == 302 and sent.url == reverse("accounts:password_reset_done")
    (message,) = mail.outbox
    assert message.to == ["ada@example.org"] and message.subject == "mlab-bench: reset your password"
    link = re.search(r"http://testserver(/account/password/reset/\S+/\S+/)", message.body).group(1)

    form = client.get(link, follow=True)
    assert "Choose a new password" in form.content.decode()
    new = "a brand new secret 7"
    done = client.post(form.redirect_chain[-1][0], {"new_password1": new, "new_password2": new})
    assert done.status_code == 302 and done.url == reverse("accounts:password_reset_complete")
    user.refresh_from_db()
    assert user.check_password(new)

    again = client.get(link, follow=True)  # the link works once
    assert "This link does not work" in again.content.decode()


@pytest.mark.django_db
def test_password_reset_for_an_unknown_address_sends_nothing_and_says_the_same(client):
    response = client.post(reverse("accounts:password_reset"), {"email": "nobody@example.org"})

    assert response.status_code == 302 and response.url == reverse("accounts:password_reset_done")
    assert mail.outbox == []


# --- Roles -------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_roles(client, people):
    # The group is made by a migration; a transactional test run before this one may have flushed it.
    migration = import_module("accounts.migrations.0002_reviewer_group")
    Group.objects.filter(name=REVIEWER_GROUP).delete()
    migration.group_create(django_apps, None)
    group = Group.objects.get(name=REVIEWER_GROUP)
    reviewer = User.objects.create_user("rev", password="x")
    reviewer.groups.add(group)
    assert roles_of(AnonymousUser()) == ["visitor"]
    assert roles_of(people["stranger"]) == ["visitor", "submitter"]
    assert roles_of(reviewer) == ["visitor", "submitter", "reviewer"]
    assert roles_of(people["staff"]) == ["visitor", "submitter", "staff"]
    assert is_reviewer(reviewer) and not is_reviewer(people["staff"]) and not is_reviewer(AnonymousUser())
    assert is_staff(people["staff"]) and not is_staff(reviewer)
    assert not is_reviewer(User(username="gone", is_active=False))

    client.force_login(reviewer)
    assert 'class="roles">visitor, submitter, reviewer<' in client.get(reverse("accounts:account")).content.decode()


# --- The account page --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_account_page_shows_your_agents_and_runs_only(client, people, private_run, tiny_task):
    others = AgentFactory(name="someone-elses", owner=people["stranger"])
    RunFactory(task_version=tiny_task, agent=others)
    public = RunFactory(task_version=tiny_task, agent=AgentFactory(name="public-one"))
    client.force_login(people["owner"])

    page = client.get(reverse("accounts:account")).content.decode()

    assert "hidden-hand" in page and "someone-elses" not in page and "public-one" not in page
    assert f'href="/runs/{private_run.pk}/"' in page and f'href="/runs/{public.pk}/"' not in page


@pytest.mark.django_db
def test_the_account_page_needs_no_more_queries_with_more_runs_agents_and_tokens(client, people, tiny_task):
    agent = AgentFactory(name="mine", owner=people["owner"], visibility="private")
    RunFactory(task_version=tiny_task, agent=agent)
    client.force_login(people["owner"])

    with CaptureQueriesContext(connection) as one:
        client.get(reverse("accounts:account"))
    for _ in range(5):
        RunFactory(task_version=tiny_task, agent=AgentFactory(owner=people["owner"]))
    token_create(user=people["owner"], name="a")
    token_create(user=people["owner"], name="b")
    with CaptureQueriesContext(connection) as six:
        page = client.get(reverse("accounts:account")).content.decode()

    assert len(re.findall(r'href="/runs/\d+/"', page)) == 6
    assert len(six.captured_queries) == len(one.captured_queries)


# --- API tokens --------------------------------------------------------------------------------------------


def api_runs(client, key=None):
    headers = {"HTTP_AUTHORIZATION": f"Token {key}"} if key else {}
    return client.get("/api/v1/runs/", **headers)


@pytest.mark.django_db
def test_a_token_is_shown_once_stored_hashed_and_acts_as_its_user(client, people, private_run):
    client.force_login(people["owner"])

    created = client.post(reverse("accounts:token_create"), {"name": "laptop"})

    assert created.status_code == 201
    key = re.search(r'<code class="token-key">(mlb_[^<]+)</code>', created.content.decode()).group(1)
    token = ApiToken.objects.get(user=people["owner"])
    assert token.name == "laptop" and key.startswith(f"mlb_{token.prefix}_")
    assert token.digest == hashlib.sha256(key.encode()).hexdigest()
    assert key not in str(list(ApiToken.objects.values_list()))  # only the prefix and the digest are kept
    later = client.get(reverse("accounts:account")).content.decode()
    assert key not in later and f"mlb_{token.prefix}_…" in later and "laptop" in later

    client.logout()
    assert private_run.pk not in [r["id"] for r in api_runs(client).json()["results"]]
    assert private_run.pk in [r["id"] for r in api_runs(client, key).json()["results"]]
    token.refresh_from_db()
    assert token.last_used_at is not None


@pytest.mark.django_db
def test_the_token_form_sent_again_makes_no_second_token(client, people):
    client.force_login(people["owner"])
    page = client.get(reverse("accounts:account")).content.decode()
    once = re.search(r'name="once" value="([0-9a-f]{32})"', page).group(1)

    first = client.post(reverse("accounts:token_create"), {"name": "laptop", "once": once})
    again = client.post(reverse("accounts:token_create"), {"name": "laptop", "once": once}, follow=True)

    assert first.status_code == 201 and ApiToken.objects.filter(user=people["owner"]).count() == 1
    assert "That form was sent already" in again.content.decode()
    fresh = re.search(r'name="once" value="([0-9a-f]{32})"', again.content.decode()).group(1)
    assert fresh != once
    client.post(reverse("accounts:token_create"), {"name": "desktop", "once": fresh})
    assert ApiToken.objects.filter(user=people["owner"]).count() == 2


@pytest.mark.django_db
def test_a_token_used_again_within_a_minute_costs_no_write(client, people):
    key = token_create(user=people["owner"], name="ci").key
    api_runs(client, key)  # the first use writes last_used_at
    first = ApiToken.objects.get().last_used_at

    with CaptureQueriesContext(connection) as again:
        assert api_runs(client, key).status_code == 200

    assert not [q for q in again.captured_queries if q["sql"].startswith('UPDATE "accounts_apitoken"')]
    assert ApiToken.objects.get().last_used_at == first


@pytest.mark.django_db
@pytest.mark.parametrize("change", ["last character", "unknown prefix", "no secret"])
def test_a_wrong_key_is_refused(client, people, change):
    key = token_create(user=people["owner"], name="ci").key
    wrong = {
        "last character": key[:-1] + ("A" if key[-1] != "A" else "B"),
        "unknown prefix": "mlb_000000000000_" + key.rsplit("_", 1)[1],
        "no secret": key.rsplit("_", 1)[0],
    }[change]

    response = api_runs(client, wrong)

    assert response.status_code in (401, 403)
    assert response.json()["detail"] == "Invalid or revoked token."


@pytest.mark.django_db
def test_a_revoked_token_is_refused_and_an_inactive_users_too(client, people):
    key = token_create(user=people["owner"], name="ci").key
    other = token_create(user=people["owner"], name="other")
    assert api_runs(client, key).status_code == 200
    client.force_login(people["owner"])
    token = ApiToken.objects.get(name="ci")

    revoked = client.post(reverse("accounts:token_revoke", args=[token.pk]), follow=True)

    assert "Token revoked" in revoked.content.decode()
    client.logout()
    assert api_runs(client, key).json()["detail"] == "Invalid or revoked token."
    assert api_runs(client, other.key).status_code == 200  # the other token still works
    User.objects.filter(pk=people["owner"].pk).update(is_active=False)
    assert api_runs(client, other.key).status_code in (401, 403)


@pytest.mark.django_db
def test_a_token_needs_a_name(client, people):
    client.force_login(people["owner"])

    response = client.post(reverse("accounts:token_create"), {"name": ""}, follow=True)

    assert "No token created: This field is required." in response.content.decode()
    assert not ApiToken.objects.exists()


@pytest.mark.django_db
def test_one_user_holds_at_most_so_many_tokens(client, people):
    for n in range(TOKENS_PER_USER_MAX):
        token_create(user=people["owner"], name=f"t{n}")
    token_create(user=people["stranger"], name="others count apart")
    client.force_login(people["owner"])

    response = client.post(reverse("accounts:token_create"), {"name": "one more"}, follow=True)

    assert f"No token created: you hold {TOKENS_PER_USER_MAX} tokens, the most one account may" in (
        response.content.decode()
    )
    assert ApiToken.objects.filter(user=people["owner"]).count() == TOKENS_PER_USER_MAX


@pytest.mark.django_db
def test_a_named_token_may_start_runs_for_staff(client, people, tiny_task, private_agent):
    key = token_create(user=people["staff"], name="ci").key

    response = client.post(
        "/api/v1/runs/",
        {"agent": "hidden-hand", "tasks": ["tiny"], "max_steps": 2},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {key}",
    )

    assert response.status_code == 201


# --- Throttling --------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_signing_up_is_throttled_per_address(client, settings):
    settings.BENCH_SIGNUP_PER_MINUTE = 2
    for n in range(2):
        assert signup(client, username=f"u{n}", email=f"u{n}@example.org").status_code == 302
        client.logout()

    refused = signup(client, username="u2", email="u2@example.org")

    assert refused.status_code == 429
    assert re.search(r"Too many sign-up attempts from your address: try again in \d+ seconds", refused.content.decode())
    assert not User.objects.filter(username="u2").exists()
    elsewhere = signup(client, username="u3", email="u3@example.org", REMOTE_ADDR="10.1.2.3")
    assert elsewhere.status_code == 302


@pytest.mark.django_db
def test_signing_in_is_throttled_per_address_even_with_the_right_password(client, settings):
    settings.BENCH_SIGNIN_PER_MINUTE = 3
    User.objects.create_user("ada", password=PASSWORD)
    for _ in range(3):
        assert signin(client, password="guess").status_code == 200

    refused = signin(client)

    assert refused.status_code == 429
    assert "Too many sign-in attempts from your address" in refused.content.decode()
    assert "_auth_user_id" not in client.session
    assert 'value="ada"' in refused.content.decode()  # the username is kept
    failed = []

    def record(sender, **kwargs):
        failed.append(kwargs["credentials"]["username"])

    user_login_failed.connect(record)
    try:
        signin(client, password="guess")
    finally:
        user_login_failed.disconnect(record)
    assert failed == []  # a throttled attempt checks no password at all
    assert signin(client, REMOTE_ADDR="10.1.2.3").status_code == 302


@pytest.mark.django_db
def test_guessing_at_one_name_does_not_lock_out_others_behind_the_same_address(client, settings):
    settings.BENCH_SIGNIN_PER_MINUTE, settings.BENCH_SIGNIN_PER_ADDRESS_PER_MINUTE = 3, 6
    User.objects.create_user("ada", password=PASSWORD)
    User.objects.create_user("bob", password=PASSWORD)
    for _ in range(4):
        signin(client, username="bob", password="guess")
    assert signin(client, username="bob").status_code == 429  # that name, from that address
    assert signin(client).status_code == 302  # another name from the same address signs in
    client.logout()
    assert signin(client, username="carol", password="guess").status_code == 429  # 7 from the address in all


@pytest.mark.django_db
def test_the_client_address_comes_from_the_proxys_header_only_from_a_trusted_proxy(client, settings):
    settings.BENCH_SIGNIN_PER_MINUTE, settings.BENCH_TRUSTED_PROXIES = 1, ["10.0.0.5"]
    User.objects.create_user("ada", password=PASSWORD)
    behind = {"REMOTE_ADDR": "10.0.0.5"}
    signin(client, password="guess", HTTP_X_FORWARDED_FOR="198.51.100.7, 203.0.113.9", **behind)
    refused = signin(client, HTTP_X_FORWARDED_FOR="198.51.100.7, 203.0.113.9", **behind)
    assert refused.status_code == 429  # the client the proxy saw, 203.0.113.9, guessed already
    assert signin(client, HTTP_X_FORWARDED_FOR="203.0.113.10", **behind).status_code == 302  # another client
    client.logout()
    untrusted = {"REMOTE_ADDR": "192.0.2.1"}
    signin(client, password="guess", HTTP_X_FORWARDED_FOR="203.0.113.50", **untrusted)
    assert signin(client, HTTP_X_FORWARDED_FOR="203.0.113.51", **untrusted).status_code == 429  # header ignored


@pytest.mark.django_db
def test_password_reset_requests_are_throttled(client, settings):
    settings.BENCH_SIGNIN_PER_MINUTE = 1
    User.objects.create_user("ada", email="ada@example.org", password=PASSWORD)
    client.post(reverse("accounts:password_reset"), {"email": "ada@example.org"})

    refused = client.post(reverse("accounts:password_reset"), {"email": "ada@example.org"})

    assert refused.status_code == 429 and "Too many password reset attempts" in refused.content.decode()
    assert len(mail.outbox) == 1
