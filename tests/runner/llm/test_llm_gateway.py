import contextlib
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path

import pytest
from django.db import connection
from django.urls import reverse

from runner.execution import run_execute
from runner.llm.gateway import (
    SLOT_LOCKS,
    LLMError,
    budget_reserve,
    budget_settle,
    client_for,
    complete,
    endpoint_check,
    prompt_bound,
)
from runner.models import LLMCall, ModelEndpoint, Run
from runner.services import run_create
from tests.factories import AgentFactory, RunFactory, StepFactory, package_write
from tests.llm_server import FakeOpenAI
from tests.waiting import wait_for

MESSAGES = [{"role": "user", "content": "hello"}]


def slots_held() -> list[tuple[int, int]]:
    """The endpoint slots held now, by any connection to the database: (endpoint id, slot) pairs."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks WHERE locktype = 'advisory' "
            "AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        keys = [row[0] for row in cursor.fetchall()]
    return sorted((key >> 16 & 0xFFFFFFFF, key & 0xFFFF) for key in keys if key >> 48 == SLOT_LOCKS)


@contextlib.contextmanager
def other_worker():
    """A connection of another worker's to the test database (a psycopg connection of its own, in autocommit)."""
    import psycopg

    params = connection.get_connection_params()
    keys = ("dbname", "user", "password", "host", "port")
    other = psycopg.connect(**{k: params[k] for k in keys if params.get(k)}, autocommit=True)
    backend = other.info.backend_pid
    try:
        yield other
    finally:
        other.close()
        wait_for(lambda: not _backend_alive(backend), 30, "the other worker's server process to end")


def _backend_alive(pid: int) -> bool:
    """Whether the database's server process ``pid`` is still there (a closed connection's ends a moment after)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # the activity a transaction reads is its first look's
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone() is not None


def slot_lock(other, endpoint: ModelEndpoint, slot: int) -> None:
    """Take ``slot`` of ``endpoint`` on ``other``, as a call in flight on another worker holds it."""
    assert other.execute("SELECT pg_try_advisory_lock(%s)", [SLOT_LOCKS << 48 | endpoint.pk << 16 | slot]).fetchone()[0]


@pytest.fixture
def run(tiny_task, endpoint):
    return RunFactory(task_version=tiny_task, agent=AgentFactory(), status=Run.Status.RUNNING, model="test-model")


def test_a_completion_is_counted_to_the_run_and_recorded(run, llm_server):
    llm_server.script = [{"content": "hi there", "usage": {"prompt_tokens": 1000, "completion_tokens": 500}}]

    result = complete(run=run, messages=MESSAGES, step_index=3, purpose="agent")

    assert result.text == "hi there"
    run.refresh_from_db()
    assert (run.tokens_in, run.tokens_out) == (1000, 500)
    assert run.cost == Decimal("0.002")  # 1000 x 1/M + 500 x 2/M
    call = LLMCall.objects.get(run=run)
    assert (call.step_index, call.model, call.messages, call.completion) == (3, "scripted-1", MESSAGES, "hi there")
    assert llm_server.requests[0]["model"] == "scripted-1"


def test_calls_to_an_endpoint_reuse_one_client_and_its_connection(run, llm_server, endpoint):
    llm_server.default = "again"
    for _ in range(3):
        assert complete(run=run, messages=MESSAGES).text == "again"
    assert len({request["_connection"] for request in llm_server.requests}) == 1  # one TCP connection, kept open
    other = ModelEndpoint.objects.create(name="other", base_url=llm_server.base_url, model_id="m", api_key_env="")

    assert client_for(other) is client_for(endpoint)  # same address and key


def test_calls_an_earlier_attempt_recorded_in_its_step_count_to_its_limit_and_its_repeats(run, llm_server, settings):
    """A resumed attempt's first step may hold calls its predecessor made: they count to the step's limit, and a
    repeated answer is looked up among them; a later step is counted from nothing."""
    settings.BENCH_LLM_CALLS_PER_STEP = 3
    earlier = [
        LLMCall.objects.create(run=run, step_index=2, endpoint="test-model", completion="same", recorded_bytes=10)
        for _ in range(2)
    ]
    llm_server.default = "same"
    call = complete(run=run, messages=MESSAGES, step_index=2, options={"temperature": 0.5})
    assert f"(call {earlier[1].pk})" in LLMCall.objects.get(pk=call.call_id).error
    with pytest.raises(LLMError, match="the run made 3 model calls in step 2"):
        complete(run=run, messages=MESSAGES, step_index=2)

    for _ in range(3):
        complete(run=run, messages=MESSAGES, step_index=3)
    assert LLMCall.objects.filter(run=run, step_index=3).count() == 3


def test_transient_errors_are_retried_with_backoff(run, llm_server):
    llm_server.script = [{"status": 500}, {"status": 429, "headers": {"Retry-After": "0"}}, "finally"]

    assert complete(run=run, messages=MESSAGES).text == "finally"
    assert len(llm_server.requests) == 3
    assert "HTTP 500" in LLMCall.objects.get(run=run).error


def test_a_server_that_keeps_failing_is_an_infrastructure_error(run, llm_server, settings):
    settings.BENCH_LLM_MAX_RETRIES = 2
    llm_server.default = {"status": 503}

    with pytest.raises(LLMError) as exc:
        complete(run=run, messages=MESSAGES)

    assert exc.value.kind == "infrastructure"
    assert "failed 3 times" in str(exc.value)
    assert len(llm_server.requests) == 3


def test_garbage_from_the_server_is_retried_then_reported(run, llm_server, settings):
    settings.BENCH_LLM_MAX_RETRIES = 1
    llm_server.default = {"body": b"<html>bad gateway</html>"}

    with pytest.raises(LLMError) as exc:
        complete(run=run, messages=MESSAGES)
    assert exc.value.kind == "infrastructure"
    assert len(llm_server.requests) == 2  # the first answer and one retry
    assert "test-model failed 2 times: the answer is not a chat completion (not JSON)" in str(exc.value)


@pytest.mark.parametrize(
    ("reply", "kind", "said"),
    [
        ({"status": 400, "content": "maximum context length is 4096"}, "request", "HTTP 400: maximum context length"),
        ({"status": 404, "body_text": '{"detail": "no such model"}'}, "request", "HTTP 404: no such model"),
        ({"status": 401, "body_text": '{"error": "bad key"}'}, "infrastructure", "HTTP 401: bad key"),
        ({"status": 403, "body_text": "<h1>forbidden</h1>"}, "infrastructure", "HTTP 403: <h1>forbidden</h1>"),
    ],
)
def test_a_request_the_endpoint_refuses_is_not_retried_and_says_what_it_said(run, llm_server, reply, kind, said):
    """400 and 404 are the caller's to mend (the run goes on); other refusals are the endpoint's setup. Either way
    asking again cannot help, and the endpoint's own message is kept, wherever its body put it."""
    llm_server.default = reply

    with pytest.raises(LLMError) as exc:
        complete(run=run, messages=MESSAGES)

    assert exc.value.kind == kind and len(llm_server.requests) == 1
    assert f"refused the call: {said}" in str(exc.value) and said in LLMCall.objects.get(run=run).error
    assert slots_held() == []


def test_an_address_no_client_can_call_is_an_infrastructure_error_not_retried(run, endpoint, settings):
    settings.BENCH_LLM_MAX_RETRIES = 3
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(base_url="ftp://127.0.0.1/v1")

    with pytest.raises(LLMError) as exc:
        complete(run=run, messages=MESSAGES)

    said = "its address ftp://127.0.0.1/v1 cannot be called: Not supported URL scheme ftp"
    assert exc.value.kind == "infrastructure" and str(exc.value) == f"the model endpoint test-model failed: {said}"
    assert LLMCall.objects.get(run=run).error == said


def test_a_token_budget_refuses_the_call_that_would_exceed_it(run, llm_server):
    Run.objects.filter(pk=run.pk).update(max_tokens=3000, tokens_in=2500)
    run.refresh_from_db()  # a run's budgets are set when it is made, and read from it

    with pytest.raises(LLMError) as exc:
        complete(run=run, messages=MESSAGES, options={"max_tokens": 600})

    assert exc.value.kind == "budget"
    assert "token budget of 3000" in str(exc.value)
    assert llm_server.requests == [] and slots_held() == []  # a refused call holds no slot


def test_a_cost_budget_refuses_the_call_that_would_exceed_it(run, llm_server):
    Run.objects.filter(pk=run.pk).update(max_cost=Decimal("0.001"), cost=Decimal("0.0009"))
    run.refresh_from_db()

    with pytest.raises(LLMError) as exc:
        complete(run=run, messages=MESSAGES, options={"max_tokens": 1000})

    assert exc.value.kind == "budget" and "cost budget" in str(exc.value)


def test_a_missing_api_key_is_a_clear_error(run, endpoint, monkeypatch):
    monkeypatch.delenv("BENCH_TEST_KEY", raising=False)
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(api_key_env="BENCH_TEST_KEY")

    with pytest.raises(LLMError, match="environment variable BENCH_TEST_KEY is empty"):
        complete(run=run, messages=MESSAGES)
    assert slots_held() == []  # the slot it took is given back


def test_the_api_key_is_sent_from_the_environment(run, endpoint, llm_server, monkeypatch):
    monkeypatch.setenv("BENCH_TEST_KEY", "sk-test-123")
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(api_key_env="BENCH_TEST_KEY")
    llm_server.script = ["ok"]

    complete(run=run, messages=MESSAGES)

    assert llm_server.requests[0]["_auth"] == "Bearer sk-test-123"


def test_a_proxy_the_environment_names_carries_the_call_unless_the_endpoint_is_exempt(run, endpoint, monkeypatch):
    proxy = FakeOpenAI().start()  # a proxy gets the request with the endpoint's whole URL: the fake answers it
    proxy.default = "through the proxy"
    try:
        monkeypatch.setenv("http_proxy", proxy.base_url.removesuffix("/v1"))
        monkeypatch.setenv("no_proxy", "exempt.invalid")
        ModelEndpoint.objects.filter(pk=endpoint.pk).update(base_url="http://model.invalid:8080/v1", timeout_s=2)

        assert complete(run=run, messages=MESSAGES).text == "through the proxy"
        ModelEndpoint.objects.filter(pk=endpoint.pk).update(base_url="http://exempt.invalid:8080/v1")
        with pytest.raises(LLMError, match="no connection to http://exempt.invalid:8080/v1"):
            complete(run=run, messages=MESSAGES)
    finally:
        proxy.stop()
    assert len(proxy.requests) == 1


def test_an_unknown_model_names_the_configured_ones(run, endpoint):
    with pytest.raises(LLMError, match="no model endpoint named 'gpt-x'; configured: test-model"):
        complete(run=run, messages=MESSAGES, model="gpt-x")


def test_test_connection_records_the_outcome_on_the_endpoint(endpoint, llm_server):
    llm_server.script = ["pong"]
    ok, message = endpoint_check(endpoint)
    endpoint.refresh_from_db()
    assert ok and endpoint.last_check_ok and "pong" in endpoint.last_check_message

    ModelEndpoint.objects.filter(pk=endpoint.pk).update(base_url="http://127.0.0.1:9/v1", timeout_s=1)
    endpoint.refresh_from_db()
    ok, message = endpoint_check(endpoint)
    endpoint.refresh_from_db()
    assert not ok and endpoint.last_check_ok is False
    assert "failed" in endpoint.last_check_message and "Connection" in endpoint.last_check_message


def test_max_concurrency_is_shared_through_slots_every_worker_sees(run, endpoint, llm_server):
    """A call waits while another worker's calls hold every slot, and takes the first one given back."""
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(max_concurrency=1)
    waited = []
    with other_worker() as other:
        slot_lock(other, endpoint, 0)

        def tick():
            waited.append(1)
            if len(waited) == 3:  # the slot frees up while the call waits (another worker's call ended)
                other.execute("SELECT pg_advisory_unlock_all()")

        llm_server.script = ["done"]
        assert complete(run=run, messages=MESSAGES, tick=tick).text == "done"
    assert len(waited) >= 3
    assert slots_held() == []  # given back after the call


def test_the_slots_of_a_worker_whose_connection_ended_are_free_at_once(run, endpoint, llm_server):
    """A worker that dies (its connection with it) holds no slot: the database gives its locks back, with no
    expiry to wait for."""
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(max_concurrency=1)
    with other_worker() as other:
        slot_lock(other, endpoint, 0)
        assert slots_held() == [(endpoint.pk, 0)]
    waited = []
    llm_server.script = ["done"]
    assert complete(run=run, messages=MESSAGES, tick=lambda: waited.append(1)).text == "done"
    assert waited == []


def test_a_call_holds_one_slot_while_it_is_made_the_first_free_one(run, endpoint, llm_server):
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(max_concurrency=3)
    seen = []

    def answer(request):
        try:
            seen.append(slots_held())
        finally:
            connection.close()  # this thread's connection
        return "ok"

    llm_server.script = [answer, answer]
    complete(run=run, messages=MESSAGES)
    with other_worker() as other:
        slot_lock(other, endpoint, 0)
        complete(run=run, messages=MESSAGES)
    assert seen == [[(endpoint.pk, 0)], [(endpoint.pk, 0), (endpoint.pk, 1)]]
    assert slots_held() == []


SQLITE_SLOTS = textwrap.dedent(
    """
    import django, sys
    from datetime import timedelta
    django.setup()
    from django.utils import timezone
    sys.path.insert(0, "tests")
    from llm_server import FakeOpenAI
    from runner.llm.gateway import complete
    from runner.models import LLMLease, ModelEndpoint

    server = FakeOpenAI().start()
    server.default = "done"
    endpoint = ModelEndpoint.objects.create(name="m", base_url=server.base_url, model_id="m", max_concurrency=1)
    now = timezone.now()
    LLMLease.objects.create(endpoint=endpoint, expires_at=now - timedelta(seconds=1))  # a dead worker's: taken back
    print("expired", complete(run=None, model="m", messages=[{"role": "user", "content": "hi"}]).text)
    held = LLMLease.objects.create(endpoint=endpoint, expires_at=now + timedelta(minutes=5))  # another call's
    ticks = []
    def tick():
        ticks.append(1)
        if len(ticks) == 3:
            held.delete()
    print("waited", complete(run=None, model="m", messages=[{"role": "user", "content": "hi"}], tick=tick).text,
          len(ticks) >= 3, LLMLease.objects.count())

    import os
    from runner.models import Agent, LLMCall, Run
    from task_bank.services import task_import
    version, _ = task_import(root=os.environ["TASK_DIR"], slug="tiny")
    run = Run.objects.create(task=version.task, task_version=version, agent=Agent.objects.create(name="a"),
                             status="running", model="m", max_tokens=10_000)
    server.default = {"content": "recorded", "usage": {"prompt_tokens": 7, "completion_tokens": 3}}
    complete(run=run, messages=[{"role": "user", "content": "hi"}], step_index=2)
    run.refresh_from_db()
    call = LLMCall.objects.get(run=run)
    print("recorded", call.completion, call.step_index, run.tokens_in, run.tokens_out, run.tokens_reserved)

    print("leases", LLMLease.objects.count())
    server.stop()
    """
)


def test_on_sqlite_an_endpoint_slot_is_a_lease_row(tmp_path):
    """SQLite (the embedded default) has no advisory locks: a slot is a row, and a dead worker's is taken back when
    it expires; a call's record gives its lease back."""
    root = Path(__file__).resolve().parents[3]
    env = {
        "PATH": "/usr/bin:/bin",
        "BENCH_VAR_DIR": str(tmp_path / "var"),
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "PYTHONPATH": str(root),
        "TASK_DIR": str(package_write(tmp_path / "tiny")),
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=root, env=env, check=True, timeout=300)
    done = subprocess.run(
        [sys.executable, "-c", SQLITE_SLOTS], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = ["expired done", "waited done True 0", "recorded recorded 2 7 3 0", "leases 0"]
    assert done.stdout.split("\n")[:4] == lines, done.stdout + done.stderr


def test_the_admin_test_connection_action_says_what_is_wrong_with_each_endpoint(
    admin_client, endpoint, llm_server, monkeypatch, settings
):
    settings.BENCH_LLM_MAX_RETRIES = 0
    monkeypatch.delenv("BENCH_TEST_KEY", raising=False)
    garbage = ModelEndpoint.objects.create(name="garbage", base_url=llm_server.base_url, model_id="garbage-1")
    keyless = ModelEndpoint.objects.create(
        name="keyless", base_url=llm_server.base_url, model_id="keyless-1", api_key_env="BENCH_TEST_KEY"
    )
    down = ModelEndpoint.objects.create(name="down", base_url="http://127.0.0.1:9/v1", model_id="down-1", timeout_s=1)

    def reply(request):
        return {"body": b"<html>bad gateway</html>"} if request["model"] == "garbage-1" else "pong"

    llm_server.default = reply
    url = reverse("admin:runner_modelendpoint_changelist")
    picked = [endpoint.pk, garbage.pk, keyless.pk, down.pk]
    response = admin_client.post(url, {"action": "test_connection", "_selected_action": picked}, follow=True)

    assert response.status_code == 200
    shown = {m.message.split(":", 1)[0]: (m.level_tag, m.message) for m in response.context["messages"]}
    assert shown["test-model"][0] == "success" and "pong" in shown["test-model"][1]
    assert shown["garbage"][0] == "error"
    assert "garbage failed once: the answer is not a chat completion (not JSON): '<html>bad" in shown["garbage"][1]
    assert shown["keyless"][0] == "error" and "environment variable BENCH_TEST_KEY is empty" in shown["keyless"][1]
    assert shown["down"][0] == "error" and "Connection" in shown["down"][1]
    assert "Traceback" not in response.content.decode()
    keyless.refresh_from_db()
    assert keyless.last_check_ok is False and "BENCH_TEST_KEY" in keyless.last_check_message
    change = admin_client.get(reverse("admin:runner_modelendpoint_change", args=[keyless.pk])).content.decode()
    assert "environment variable BENCH_TEST_KEY is empty" in change


@pytest.mark.django_db(transaction=True)
def test_an_agent_may_not_pick_another_configured_model(tiny_task, endpoint, llm_server):
    ModelEndpoint.objects.create(name="expensive", base_url=llm_server.base_url, model_id="big")
    script = [
        {"type": "llm", "messages": [{"role": "user", "content": "hi"}], "model": "expensive"},
        {"type": "llm", "messages": [{"role": "user", "content": "hi"}], "max_tokens": "lots"},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]
    run = run_create(
        task=tiny_task.task, agent=AgentFactory(config={"script": script}), model="test-model", enqueue=False
    )
    run = run_execute(run.pk)
    assert run.status == "finished"
    assert "this run may use only the models it was started with (main 'test-model'" in run.stderr_tail
    assert "max_tokens must be a whole number" in run.stderr_tail
    assert llm_server.requests == [] and Run.objects.get(pk=run.pk).tokens_in == 0


def test_the_budget_reserves_the_worst_case_of_any_tokenizer(run, llm_server):
    """A prompt of 24,000 bytes that an endpoint counts one token a byte: the old estimate (JSON length / 4, 6,000)
    let the call through a 20,000 budget, and it spent 24,500. The bound is a token a byte, reserved before."""
    Run.objects.filter(pk=run.pk).update(max_tokens=20_000)
    run.refresh_from_db()
    llm_server.script = [{"content": "ok", "usage": {"prompt_tokens": 24_000, "completion_tokens": 500}}]

    with pytest.raises(LLMError) as exc:
        complete(run=run, messages=[{"role": "user", "content": "é" * 12_000}], options={"max_tokens": 500})

    assert exc.value.kind == "budget" and "one token per byte" in str(exc.value)
    assert llm_server.requests == []
    run.refresh_from_db()
    assert run.tokens_in + run.tokens_out == 0 and run.tokens_reserved == 0


def test_calls_in_flight_hold_their_reservation_until_they_are_settled(run, llm_server):
    """Two calls at once cannot each fit a budget that holds only one: the second is refused while the first is in
    flight, and what the first reserved is given back once it is recorded with its real usage."""
    Run.objects.filter(pk=run.pk).update(max_tokens=2 * prompt_bound(MESSAGES) + 1_500)
    run.refresh_from_db()
    first = budget_reserve(run, ModelEndpoint.objects.get(name=run.model), MESSAGES, 1_000)

    with pytest.raises(LLMError, match="held by calls in flight"):
        complete(run=run, messages=MESSAGES, options={"max_tokens": 1_000})

    budget_settle(run, first)
    llm_server.script = [{"content": "ok", "usage": {"prompt_tokens": 5, "completion_tokens": 2}}]
    assert complete(run=run, messages=MESSAGES, options={"max_tokens": 1_000}).text == "ok"
    run.refresh_from_db()
    assert (run.tokens_in, run.tokens_out, run.tokens_reserved) == (5, 2, 0)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("per_step", "per_run", "limit"), [(3, 100, "3 model calls in step 0"), (100, 4, "4 model")])
def test_a_run_records_at_most_its_calls_per_step_and_per_run(
    tiny_task, endpoint, llm_server, settings, per_step, per_run, limit
):
    """Every request is a row with its prompt: 3,023 of them in 3 steps grew the database by 89 MB. Past the
    bound the run ends at a limit and nothing more is written (refused requests count too)."""
    settings.BENCH_LLM_CALLS_PER_STEP, settings.BENCH_LLM_CALLS_PER_RUN = per_step, per_run
    llm_server.default = "ok"
    ask = {"type": "llm", "messages": [{"role": "user", "content": "x" * 1000}]}
    refused = {**ask, "model": "not-given"}
    script = [
        ask,
        refused,
        ask,
        ask,
        ask,
        ask,
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "-"}},
    ]
    run = run_create(
        task=tiny_task.task, agent=AgentFactory(config={"script": script}), model="test-model", enqueue=False
    )

    run = run_execute(run.pk)

    assert (run.status, run.failure_kind) == ("failed", "limit"), run.error
    assert limit in run.error
    assert LLMCall.objects.filter(run=run).count() == min(per_step, per_run)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("per_step_mb", "per_run_mb", "shape", "limit"),
    [(1, 0, "a.aaa", "model calls in step 1 would hold 1.1 MB of prompts and completions, more than one step may "
      "record (1 MB)"),
     (0, 1, "a.a.a", "model calls in all would hold 1.1 MB of prompts and completions, more than one run may record "
      "(1 MB)")],
)  # fmt: skip
def test_a_run_records_at_most_its_bytes_of_model_calls_per_step_and_per_run(
    tiny_task, endpoint, llm_server, settings, per_step_mb, per_run_mb, shape, limit
):
    """A prompt may be a whole 8 MB protocol line, a hundred times a step: the bytes recorded are bounded too, the
    call that would pass the bound never made, what is recorded so far counted as the rows hold it."""
    settings.BENCH_LLM_RECORDED_MB_PER_STEP, settings.BENCH_LLM_RECORDED_MB_PER_RUN = per_step_mb, per_run_mb
    llm_server.default = "ok"
    ask = {"type": "llm", "messages": [{"role": "user", "content": "x" * 380_000}]}  # "a" in the shape
    look = {"type": "act", "action": "List Files", "input": {"dir_path": "."}}  # "." in the shape: a step
    script = [ask if c == "a" else look for c in shape]
    script.append({"type": "act", "action": "Final Answer", "input": {"final_answer": "-"}})
    run = run_create(
        task=tiny_task.task, agent=AgentFactory(config={"script": script}), model="test-model", enqueue=False
    )

    run = run_execute(run.pk)

    assert (run.status, run.failure_kind) == ("failed", "limit"), run.error
    assert limit in run.error
    assert LLMCall.objects.filter(run=run).count() == shape.count("a") - 1  # the last would pass: never made
    assert all(380_000 < call.recorded_bytes < 381_000 for call in LLMCall.objects.filter(run=run))


def test_a_steps_calls_are_listed_a_page_at_a_time(client, run, settings):
    from runner.views.runs import LLM_CALLS_PAGE

    step = StepFactory(run=run, index=0)
    for n in range(LLM_CALLS_PAGE + 5):
        LLMCall.objects.create(run=run, step=step, step_index=0, model="m", completion=f"answer number {n}")
    url = reverse("runner:step_llm_calls", args=[run.pk, 0])

    first = client.get(url).content.decode()
    second = client.get(url + "?page=2").content.decode()

    assert "answer number 0<" in first and f"answer number {LLM_CALLS_PAGE}<" not in first
    assert f"answer number {LLM_CALLS_PAGE}<" in second and "?page=2" in first


@pytest.mark.django_db(transaction=True)
def test_a_run_cancelled_during_a_model_call_does_not_wait_for_its_answer(tiny_task, endpoint, llm_server):
    """The run goes on ticking during a call (heartbeat, deadline, cancel): a call once held its run for as long
    as the agent's max_tokens allowed. Cancelled while the endpoint takes 20 s, the run ends without its answer."""
    from django.db import connection

    from runner.services import run_cancel

    def cancel_then_answer_late(request):
        try:
            run_cancel(run=Run.objects.get(pk=run.pk))
        finally:
            connection.close()
        return {"content": "late answer", "delay": 20}

    llm_server.script = [cancel_then_answer_late]
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(timeout_s=60)  # the endpoint may take its time
    script = [
        {"type": "llm", "messages": [{"role": "user", "content": "think long"}]},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "-"}},
    ]
    run = run_create(
        task=tiny_task.task, agent=AgentFactory(config={"script": script}), model="test-model", enqueue=False
    )

    run = run_execute(run.pk)

    assert run.status == "cancelled"
    assert not LLMCall.objects.filter(run=run, completion="late answer").exists()
    assert slots_held() == [] and run.tokens_reserved == 0  # its slot and its reservation given back
