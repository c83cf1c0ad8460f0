import json
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from runner.models import Run, Step
from tests.integration.conftest import ROOT, service_env
from tests.scoring import eval_score_of


def bench_run(capsys, *args) -> list[dict]:
    call_command("bench_run", *args)
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


@pytest.mark.django_db(transaction=True)
def test_it_runs_the_baseline_inline_and_reports_the_eval_score(capsys, digits, tmp_path):
    lines = bench_run(capsys, "--agent", "baseline", "--task", "digits", "--inline")

    page = f"http://127.0.0.1:8000/runs/{lines[0]['run']}/"  # the run's page on the site's address
    assert lines[0] == {"run": lines[0]["run"], "task": "digits", "agent": "baseline", "status": "queued", "page": page}
    final = lines[-1]
    assert final["status"] == "finished"
    run = Run.objects.get(pk=final["run"])
    assert [s.action for s in Step.objects.filter(run=run)] == [
        "List Files",
        "Execute Script",
        "Final Answer",
    ]
    assert final["final_score"] == pytest.approx(eval_score_of(run, tmp_path))
    assert 0.5 < final["final_score"] < 0.95
    # The baseline was measured first, by a validation run of the baseline agent.
    digits.refresh_from_db()
    assert digits.status == "ready"
    assert digits.baseline_score == pytest.approx(final["final_score"])
    assert final["improvement"] == pytest.approx(0.0)
    assert final["succeeded"] is False


@pytest.mark.django_db
def test_ctrl_c_while_waiting_says_the_runs_go_on_and_where_without_a_traceback(capsys, digits, monkeypatch, settings):
    settings.BENCH_SITE_URL = "https://bench.example.org/"

    def interrupted(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr("runner.management.commands.bench_run.time.sleep", interrupted)
    with pytest.raises(SystemExit) as stopped:
        call_command("bench_run", "--agent", "baseline", "--task", "digits", "--wait")
    run = Run.objects.get()
    said = capsys.readouterr()
    assert stopped.value.code == 130 and "Traceback" not in said.err
    assert f"stopped waiting; the runs go on without you: https://bench.example.org/runs/{run.pk}/" in said.err
    assert run.is_live  # nothing cancelled it


@pytest.mark.django_db
def test_an_unknown_agent_is_refused_with_the_valid_names(digits):
    with pytest.raises(CommandError) as exc:
        call_command("bench_run", "--agent", "nobody", "--task", "digits")
    assert "unknown agent 'nobody'" in str(exc.value)
    assert "baseline@1" in str(exc.value)
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_an_unknown_task_is_refused_with_the_valid_names(digits):
    with pytest.raises(CommandError) as exc:
        call_command("bench_run", "--agent", "baseline", "--task", "digits", "--task", "nope")
    assert "unknown task 'nope'" in str(exc.value)
    assert "valid tasks: digits" in str(exc.value)
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_a_task_that_failed_validation_or_is_retired_is_refused_with_the_reason(tiny_task):
    tiny_task.status = "failed"
    tiny_task.validation_log = "get_score returned 'high', not a number"
    tiny_task.save()
    with pytest.raises(CommandError) as exc:
        call_command("bench_run", "--agent", "baseline", "--task", "tiny")
    assert "task tiny v1 failed validation and cannot run" in str(exc.value)
    assert "get_score returned 'high', not a number" in str(exc.value)

    tiny_task.task.is_enabled = False
    tiny_task.task.save()
    with pytest.raises(CommandError, match="task tiny is retired and takes no new runs"):
        call_command("bench_run", "--agent", "baseline", "--task", "tiny")
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-steps", "0"], "max_steps must be at least 1"),
        (["--max-steps", "-5"], "max_steps must be at least 1"),
        (["--max-time", "-1"], "max_time_s must be at least 1"),
        (["--max-tokens", "0"], "max_tokens must be at least 1"),
        (["--max-steps", "3000000000"], "max_steps must be at most 2147483647"),
        (["--max-cost", "1e9"], "max_cost must be at most 999999"),
        (["--max-cost", "-1"], "max_cost must be at least 0"),
        (["--timeout", "-1"], "expected a positive number of seconds"),
        (["--model", "gpt-x"], "no enabled model endpoint named 'gpt-x'; configured: none yet"),
    ],
)
@pytest.mark.django_db
def test_bad_limits_and_models_are_refused_before_any_run_is_made(digits, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("bench_run", "--agent", "baseline", "--task", "digits", *args)
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_more_runs_than_the_cap_are_refused_in_one_line_and_a_task_named_twice_counts_once(
    capsys, digits, tiny_task, settings
):
    with pytest.raises(CommandError) as exc:
        call_command("bench_run", "--agent", "baseline", "--task", "digits", "--repeats", "100000")
    assert str(exc.value) == (
        "1 task(s) x 100000 repeat(s) would make 100000 runs; at most 500 runs per request (BENCH_MAX_RUNS_PER_REQUEST)"
    )
    assert not Run.objects.exists()

    settings.BENCH_MAX_RUNS_PER_REQUEST = 4
    args = ["--agent", "baseline", "--task", "tiny", "--task", "digits", "--task", "tiny", "--repeats", "2"]
    assert [line["task"] for line in bench_run(capsys, *args)] == ["tiny", "tiny", "digits", "digits"]
    with pytest.raises(CommandError, match="2 task.s. x 3 repeat.s. would make 6 runs; at most 4 runs per request"):
        call_command("bench_run", *args[:-1], "3")
    assert Run.objects.count() == 4


@pytest.mark.django_db
def test_an_agent_that_uses_an_llm_needs_a_model(digits, endpoint):
    with pytest.raises(CommandError, match="agent research uses an LLM: give it a model .*configured: test-model"):
        call_command("bench_run", "--agent", "research", "--task", "digits")
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_with_the_queue_unreachable_it_exits_non_zero_with_one_line_and_the_run_stays_queued(digits, broker_down):
    db = connection.settings_dict
    if db["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("the command runs in another process on the test database; it needs PostgreSQL")
    env = {
        **service_env(CELERY_BROKER_URL=broker_down),
        "DATABASE_URL": f"postgres://{db['USER'] or 'postgres'}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}",
    }
    command = [sys.executable, "manage.py", "bench_run", "--agent", "baseline", "--task", "digits"]

    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    run = Run.objects.get()
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"CommandError: the job queue is unreachable (Error 111 connecting to {broker_down[8:-2]}. Connection "
        f"refused.); run {run.pk} stays queued and will be sent when the queue is back"
    ]
    assert run.status == "queued" and run.sent_at is None
