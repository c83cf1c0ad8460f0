"""Schemathesis over the live schema: every answer of the API is declared in its OpenAPI schema, none is a 5xx,
and bad input is refused. Bounded: a few examples per operation and mode, a time limit for the whole test.

(Schemathesis's pytest loader, ``from_fixture``, does not work with pytest 9.2, so the test drives each
operation's Hypothesis strategy itself.)"""

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from rest_framework.authtoken.models import Token
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from runner.agents.submissions import submission_create
from runner.models import RunSpec
from runner.throttles import RunRequestThrottle
from tests.factories import AgentFactory, RunFactory, StepFactory

EXAMPLES = 25  # per operation and mode (valid input, invalid input)


@pytest.fixture
def api(live_server, tiny_task, settings, monkeypatch):
    """The live schema and a staff token's headers, over a run with a step, a submission and the tiny task."""
    settings.BENCH_MAX_RUNS_PER_REQUEST = 3  # what the fuzzer may queue in one request
    monkeypatch.setattr(RunRequestThrottle, "THROTTLE_RATES", {"run_requests": "10000/hour"})  # reach the checks
    run = RunFactory(task_version=tiny_task, agent=AgentFactory(name="solver"), status="finished")
    StepFactory(run=run, index=0)
    staff = get_user_model().objects.create_user("fuzzer", password="x", is_staff=True)
    submitter = get_user_model().objects.create_user("asker", password="x")
    asked = RunSpec(AgentFactory(name="asked", owner=submitter))
    submission_create(submitter=submitter, spec=asked, tasks=[tiny_task.task])
    headers = {"Authorization": f"Token {Token.objects.create(user=staff).key}"}
    return schemathesis.openapi.from_url(f"{live_server.url}/api/v1/schema/"), headers


@pytest.mark.timeout(300)
@pytest.mark.django_db(transaction=True)
def test_every_answer_is_declared_and_none_is_a_server_error(api):
    schema, headers = api
    failures = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 23  # 17, the reproductions' 3 and the Inspect logs' 3 (two out, one in)
    for operation in operations:
        for mode in GenerationMode:

            @given(case=operation.as_strategy(generation_mode=mode))
            @hypothesis_settings(
                max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
            )
            def check(case):
                # The staff token below is the request's auth: a session cookie generated beside it would make
                # schemathesis take the token for generated (invalid) auth and expect a refusal.
                if case.cookies:
                    case.cookies.pop("sessionid", None)
                # a schema-valid request may still be refused (an unknown task, a task that takes no runs)
                case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])

            try:
                check()
            except Unsatisfiable:  # nothing in its schema to violate (a free string in the path)
                assert mode == GenerationMode.NEGATIVE
            except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - every operation is tried, failures listed
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.timeout(300)
@pytest.mark.django_db(transaction=True)
def test_every_query_string_the_schema_allows_is_accepted(api):
    """The lists' query parameters are generated from the filters the server parses with (``runner.filters``), so
    any query the schema allows is answered, not refused (a ?before= naming no run is not found: 404)."""
    schema, headers = api
    failures = []
    for operation in [result.ok() for result in schema.get_all_operations()]:
        if operation.method.upper() != "GET":
            continue

        @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
        @hypothesis_settings(
            max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
        )
        def check(case):
            if case.cookies:
                case.cookies.pop("sessionid", None)
            case.call_and_validate(headers=headers, checks=[positive_data_acceptance])

        try:
            check()
        except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - every operation is tried, failures listed
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
