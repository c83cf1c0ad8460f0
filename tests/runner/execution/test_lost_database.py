"""A lost database connection against an error the database answered: the first is tried again on a new
connection, or ends the attempt and hands the run back, bounded by the run's attempts; the second is no lost
connection and is never tried again."""

import pytest
from django.db import OperationalError, connection

from core.db_retry import db_retried
from runner.execution import recording, run_execute
from runner.execution.session import run_claim
from runner.models import Run
from runner.services import run_create
from tests.factories import AgentFactory, validate_now

FINAL = {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}}
WRITE = {"type": "act", "action": "Write File", "input": {"file_name": "value.txt", "content": "3"}}


def connection_killed() -> None:
    """This connection's server process ends, as in a restart or an operator's pg_terminate_backend."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")


def statement_timed_out() -> None:
    """The database refuses a statement (its time limit) and the connection stays usable."""
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 50")
        try:
            cursor.execute("SELECT pg_sleep(5)")
        finally:
            cursor.execute("SET statement_timeout = 0")


@pytest.mark.django_db(transaction=True)
def test_a_lost_connection_is_tried_again_on_a_new_one():
    calls = []

    def work():
        calls.append(1)
        if len(calls) == 1:
            connection_killed()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 7")
            return cursor.fetchone()[0]

    assert db_retried(work) == 7
    assert len(calls) == 2


@pytest.mark.django_db(transaction=True)
def test_an_error_the_database_answered_is_raised_at_once(settings):
    settings.BENCH_DB_RETRY_S = 5
    calls = []

    def work():
        calls.append(1)
        statement_timed_out()

    with pytest.raises(OperationalError, match="statement timeout"):
        db_retried(work)
    assert len(calls) == 1  # no second try: the connection was never lost
    assert connection.is_usable()


def ended_with(monkeypatch, failure, *, lost_attempts: int, tiny_task) -> Run:
    """A run whose end is recorded over a database that fails as ``failure`` does, once."""
    validate_now(tiny_task)
    run = run_create(task=tiny_task.task, agent=AgentFactory(config={"script": [WRITE, FINAL]}), enqueue=False)
    Run.objects.filter(pk=run.pk).update(lost_attempts=lost_attempts)
    real_finish, failed = recording._finish, []

    def finish(**kwargs):
        if not failed:
            failed.append(1)
            failure()
        return real_finish(**kwargs)

    monkeypatch.setattr(recording, "_finish", finish)
    run_execute(run.pk)
    assert failed
    return Run.objects.get(pk=run.pk)


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_end_loses_the_database_is_handed_back_and_ended_by_its_next_attempt(
    monkeypatch, tiny_task, broker_down
):
    run = ended_with(monkeypatch, connection_killed, lost_attempts=0, tiny_task=tiny_task)
    assert (run.status, run.attempt, run.lost_attempts, run.worker) == ("queued", 1, 1, "")
    run_execute(run.pk)  # the next attempt: the conversation ended already, so it is evaluated and ended
    run.refresh_from_db()
    assert (run.status, run.attempt, run.final_score) == ("finished", 2, 3.0), run.error


@pytest.mark.django_db(transaction=True)
def test_a_run_that_loses_the_database_once_too_often_fails_instead_of_going_round(
    monkeypatch, settings, tiny_task, broker_down
):
    settings.BENCH_RUN_MAX_ATTEMPTS = 3
    run = ended_with(monkeypatch, connection_killed, lost_attempts=2, tiny_task=tiny_task)
    assert (run.status, run.failure_kind, run.lost_attempts) == ("failed", "infrastructure", 3)
    assert "lost the database, 3 times; gave up" in run.error


@pytest.mark.django_db(transaction=True)
def test_a_statement_the_database_refuses_at_the_end_fails_the_run_without_a_lost_attempt(
    monkeypatch, tiny_task, broker_down
):
    run = ended_with(monkeypatch, statement_timed_out, lost_attempts=0, tiny_task=tiny_task)
    assert (run.status, run.failure_kind, run.lost_attempts) == ("failed", "infrastructure", 0)
    assert "recording it failed" in run.error and "statement timeout" in run.error


@pytest.mark.django_db(transaction=True)
def test_a_hand_back_the_database_took_but_did_not_answer_still_sends_the_run(monkeypatch, tiny_task):
    from runner.execution import session as sessions

    run = run_claim(run_create(task=tiny_task.task, agent=AgentFactory(), enqueue=False).pk, worker="w@h")
    real, sent = sessions.db_retried, []

    def answer_lost(work, **kwargs):
        work()  # the database takes the write; its answer is lost, and the write is tried again
        return real(work, **kwargs)

    monkeypatch.setattr(sessions, "db_retried", answer_lost)
    monkeypatch.setattr(sessions, "run_enqueue", lambda queued: sent.append(queued.pk))
    sessions.RunSession(run).hand_back()

    assert Run.objects.get(pk=run.pk).status == "queued"
    assert sent == [run.pk]  # not left for the reaper's resend
