import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from runner.models import Agent, ModelEndpoint, Run


@pytest.mark.django_db
def test_first_start_loads_tasks_agents_admin_endpoints_and_queues_the_demo(capsys, settings, tmp_path):
    settings.VAR_DIR = tmp_path  # where the generated password is kept for bench_ready
    settings.BENCH_ADMIN_PASSWORD = ""
    settings.BENCH_MODEL_ENDPOINTS = json.dumps(
        [{"name": "local-llama", "base_url": "http://127.0.0.1:8080/v1", "price_input_per_mtok": 0.5}]
    )
    call_command("bench_init")
    out = capsys.readouterr().out

    assert "created admin account 'admin' with password:" in out
    assert get_user_model().objects.get(username="admin").is_superuser
    assert {"baseline", "research", "aide", "tuner"} <= set(Agent.objects.values_list("name", flat=True))
    endpoint = ModelEndpoint.objects.get(name="local-llama")
    assert endpoint.model_id == "local-llama" and float(endpoint.price_input_per_mtok) == 0.5
    demo = Run.objects.filter(queue=Run.Queue.DEMO)
    assert demo.filter(purpose="validation", agent__name="baseline").exists() and "queued the demo" in out

    assert "built-in tasks: " in out and "task digits: v1" not in out  # a task's line only with --verbosity 2

    call_command("bench_init")  # a second start changes nothing
    assert "created admin" not in capsys.readouterr().out
    assert Run.objects.count() == demo.count()


@pytest.mark.django_db
def test_make_runs_first_start_says_nothing_bench_ready_has_the_last_word(capsys, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.BENCH_ADMIN_PASSWORD = ""
    call_command("bench_init", "--verbosity", "0")
    assert capsys.readouterr().out == ""
    assert (tmp_path / "admin-password").exists() and Run.objects.exists()


@pytest.mark.django_db
def test_a_bad_endpoint_list_is_a_clear_error(settings):
    settings.BENCH_MODEL_ENDPOINTS = '[{"name": "x"}]'
    with pytest.raises(CommandError, match="a model endpoint needs at least name and base_url"):
        call_command("bench_init", "--no-demo")


@pytest.mark.django_db
def test_with_the_local_model_on_it_registers_local_smollm2_free_and_one_call_at_a_time(capsys, settings):
    settings.BENCH_LOCAL_MODEL = True
    settings.BENCH_LOCAL_MODEL_PORT = 8123
    call_command("bench_init", "--no-demo")

    endpoint = ModelEndpoint.objects.get(name="local-smollm2")
    assert endpoint.base_url == "http://127.0.0.1:8123/v1"
    assert endpoint.model_id == str(settings.VAR_DIR / "models" / "smollm2-135m-instruct")
    assert (endpoint.price_input_per_mtok, endpoint.price_output_per_mtok) == (0, 0)
    assert (endpoint.max_concurrency, endpoint.output_tokens_per_s) == (1, 0.5)
    assert "too small and too slow to make progress" in capsys.readouterr().out


@pytest.mark.django_db
def test_without_the_local_model_no_local_endpoint_is_registered(settings):
    settings.BENCH_LOCAL_MODEL = False
    call_command("bench_init", "--no-demo")
    assert not ModelEndpoint.objects.filter(name="local-smollm2").exists()


@pytest.mark.django_db(transaction=True)
def test_the_last_words_of_the_start_say_where_the_site_is_and_the_admin_password_until_it_changes(
    live_server, capsys, settings, tmp_path
):
    settings.VAR_DIR = tmp_path
    settings.BENCH_ADMIN_PASSWORD = ""
    host, port = live_server.url.removeprefix("http://").split(":")
    settings.BENCH_HOST, settings.BENCH_PORT = host, int(port)
    call_command("bench_init", "--no-demo")
    password = capsys.readouterr().out.split("with password: ", 1)[1].split()[0]
    assert (tmp_path / "admin-password").stat().st_mode & 0o777 == 0o600

    call_command("bench_ready", "--once", "--timeout", "30")
    said = capsys.readouterr().out
    assert f"mlab-bench is at {live_server.url}/" in said and f"user admin, password {password}" in said

    admin = get_user_model().objects.get(username="admin")
    admin.set_password("changed-by-its-owner")
    admin.save()
    call_command("bench_ready", "--once", "--timeout", "30")
    said = capsys.readouterr().out
    assert "mlab-bench is at" in said and "password" not in said
    assert not (tmp_path / "admin-password").exists()
