import re

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from runner.models import Run
from tests.factories import AgentFactory, RunFactory, StepFactory


@pytest.fixture
def staff_token(db):
    user = get_user_model().objects.create_user("curator", password="x", is_staff=True)
    return Token.objects.create(user=user).key


def test_tasks_runs_steps_and_leaderboard_are_readable(client, tiny_task):
    run = RunFactory(task_version=tiny_task, agent=AgentFactory(name="solver"), succeeded=True, final_score=3.0)
    StepFactory(run=run, index=0, action="List Files")

    tasks = client.get("/api/v1/tasks/").json()
    assert tasks["results"][0]["slug"] == "tiny"
    assert tasks["results"][0]["current_version"]["metric_name"] == "value"
    runs = client.get("/api/v1/runs/", {"task": "tiny"}).json()
    assert runs["results"][0]["id"] == run.pk and runs["results"][0]["agent"] == "solver"
    steps = client.get(f"/api/v1/runs/{run.pk}/steps/").json()
    assert steps["results"][0]["action"] == "List Files"
    board = client.get("/api/v1/leaderboard/").json()
    assert board[0]["agent"] == "solver" and board[0]["success_rate"] == 1.0


def test_starting_runs_needs_staff_and_validates_the_request(client, tiny_task, staff_token, baseline_agent):
    assert client.post("/api/v1/runs/", {"agent": "baseline", "tasks": ["tiny"]}).status_code == 403

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {staff_token}")
    bad = api.post("/api/v1/runs/", {"agent": "nobody", "tasks": ["nope"]}, format="json")
    assert bad.status_code == 400
    assert "unknown agent 'nobody'" in bad.json()["agent"][0] and "unknown task nope" in bad.json()["tasks"][0]

    created = api.post("/api/v1/runs/", {"agent": "baseline", "tasks": ["tiny"], "repeats": 2}, format="json")
    assert created.status_code == 201 and len(created.json()) == 2
    run_id = created.json()[0]["id"]

    cancelled = api.post(f"/api/v1/runs/{run_id}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert api.post(f"/api/v1/runs/{run_id}/cancel/").status_code == 409
    assert Run.objects.filter(status="queued").count() == 1


def test_the_openapi_schema_and_docs_are_served_offline(client, db):
    schema = client.get("/api/v1/schema/")
    assert schema.status_code == 200 and b"/api/v1/runs/{id}/cancel/" in schema.content
    docs = client.get("/api/v1/docs/").content.decode()
    assert "swagger-ui" in docs
    assert not re.search(r"""(src|href)=["']https?://""", docs)  # every asset is served by the site itself


def test_a_request_for_more_runs_than_the_cap_is_refused_whole_and_duplicates_count_once(
    tiny_task, staff_token, baseline_agent, settings
):
    settings.BENCH_MAX_RUNS_PER_REQUEST = 5
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {staff_token}")

    created = api.post("/api/v1/runs/", {"agent": "baseline", "tasks": ["tiny"] * 20, "repeats": 5}, format="json")
    assert created.status_code == 201 and [r["task"] for r in created.json()] == ["tiny"] * 5
    assert Run.objects.count() == 5

    refused = api.post("/api/v1/runs/", {"agent": "baseline", "tasks": ["tiny"], "repeats": 6}, format="json")
    assert refused.status_code == 400
    assert refused.json() == {
        "detail": "1 task(s) x 6 repeat(s) would make 6 runs; at most 5 runs per request (BENCH_MAX_RUNS_PER_REQUEST)"
    }
    huge = api.post("/api/v1/runs/", {"agent": "baseline", "tasks": ["tiny"], "repeats": 10**30}, format="json")
    assert huge.status_code == 400 and "at most 5 runs per request" in huge.json()["detail"]
    assert Run.objects.count() == 5


@pytest.mark.django_db(transaction=True)
def test_with_the_queue_unreachable_the_api_answers_503_and_the_runs_stay_queued_to_be_sent_again(
    tiny_task, staff_token, baseline_agent, broker_down
):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {staff_token}")

    response = api.post("/api/v1/runs/", {"agent": "baseline", "tasks": ["tiny"], "repeats": 2}, format="json")

    assert response.status_code == 503 and response["Content-Type"] == "application/json"
    runs = list(Run.objects.order_by("pk"))
    assert response.json()["runs"] == [run.pk for run in runs]
    assert response.json()["detail"] == (
        f"the job queue is unreachable (Error 111 connecting to {broker_down[len('redis://') : -len('/0')]}. "
        f"Connection refused.); runs {runs[0].pk}, {runs[1].pk} stay queued and will be sent when the queue is back; "
        "do not send the request again"
    )
    assert [(run.status, run.sent_at) for run in runs] == [("queued", None), ("queued", None)]


def test_the_schema_says_no_text_parameter_takes_a_nul_byte_and_every_operation_may_answer_414(client, db):
    # A NUL byte is refused on every request (core.middleware): a schema that allowed one would call the
    # refusal a mismatch. 414 comes from gunicorn, before the API: declared on each operation (core.schema).
    schema = client.get("/api/v1/schema/?format=json").json()
    listing = schema["paths"]["/api/v1/runs/"]["get"]
    texts = [
        p["schema"] for p in listing["parameters"] if p["schema"].get("type") == "string" and "enum" not in p["schema"]
    ]
    assert texts and all(re.fullmatch(s["pattern"], "a\x00b") is None for s in texts)
    assert all(re.fullmatch(s["pattern"], "tuner") for s in texts if s["pattern"] == r"^[^\x00]*$")
    operations = [op for path in schema["paths"].values() for op in path.values() if isinstance(op, dict)]
    assert all("414" in op["responses"] for op in operations)
