import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from runner.models import Agent, ModelEndpoint, Run


@pytest.mark.django_db
def test_first_start_loads_tasks_agents_admin_endpoints_and_queues_the_demo(capsys, settings):
    settings.BENCH_ADMIN_PASSWORD = ""
    settings.BENCH_MODEL_ENDPOINTS = json.dumps(
        [{"name": "local-llama", "base_url": "http://127.0.0.1:8080/v1", "price_input_per_mtok": 0.5}]
    )
    call_command("bench_init")
    out = capsys.readouterr().out

    assert "created admin account 'admin' with password:" in out
    assert get_user_model().objects.get(username="admin").is_superuser
    assert {"baseline", "research", "tuner"} <= set(Agent.objects.values_list("name", flat=True))
    endpoint = ModelEndpoint.objects.get(name="local-llama")
    assert endpoint.model_id == "local-llama" and float(endpoint.price_input_per_mtok) == 0.5
    demo = Run.objects.filter(queue=Run.Queue.DEMO)
    assert demo.filter(purpose="validation", agent__name="baseline").exists() and "queued the demo" in out

    call_command("bench_init")  # a second start changes nothing
    assert "created admin" not in capsys.readouterr().out
    assert Run.objects.count() == demo.count()


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
