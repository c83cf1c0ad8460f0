import os
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.celery import app as celery_app
from tests.backends import BACKENDS, skip_unless_backend
from tests.factories import package_write

TEST_QUEUE = f"bench-test-{uuid.uuid4().hex[:8]}"


def pytest_configure(config):
    """A fast password hasher: Django's default takes most of a second per password on purpose, and the suite makes
    hundreds. Processes a test starts (gunicorn, workers) keep the default and check no password made here."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Static files as static/ holds them now, not as a `make run` of another checkout collected them.
    settings.WHITENOISE_USE_FINDERS = True
    # A bare MLAgentBench folder gets the platform's packages only, here and in the processes tests start:
    # MLAgentBench's environment is about 6.5 GB (tests/runner/execution/test_task_packages.py sets its own).
    os.environ["BENCH_BARE_FOLDER_PACKAGES"] = settings.BENCH_BARE_FOLDER_PACKAGES = "none"


@pytest.fixture(scope="session", autouse=True)
def celery_test_queue():
    """Runs queued by tests go to a queue of this test session only."""
    celery_app.conf.task_default_queue = TEST_QUEUE
    yield TEST_QUEUE


@pytest.fixture
def broker_down():
    """Point this process's Celery app at a broker that cannot be reached (a closed port on 127.0.0.1)."""
    from tests.brokers import closed_port_url, use_broker

    old, url = celery_app.conf.broker_url, closed_port_url()
    use_broker(url)
    yield url
    use_broker(old)


@pytest.fixture(autouse=True)
def one_counting_window(monkeypatch):
    """Limits count per clock window (core.shared_cache.count_hit): within a test, every hit falls in one window,
    however long a busy machine makes the test take (a minute's boundary would otherwise reset a count midway)."""
    now = time.time()
    monkeypatch.setattr("core.shared_cache.time", SimpleNamespace(time=lambda: now))


@pytest.fixture
def broker_frozen():
    """Point this process's Celery app at a broker that accepts connections and never answers."""
    from tests.brokers import FrozenBroker, use_broker

    old, frozen = celery_app.conf.broker_url, FrozenBroker()
    use_broker(frozen.url)
    yield frozen.url
    use_broker(old)
    frozen.close()


@pytest.fixture(scope="session")
def bench_var(tmp_path_factory) -> Path:
    """One data folder per test session: prepared tasks and blobs are shared between tests."""
    return tmp_path_factory.mktemp("var")


@pytest.fixture(autouse=True)
def bench_dirs(settings, bench_var):
    settings.BENCH_DATA_DIR = bench_var
    settings.BENCH_RUNS_DIR = bench_var / "runs"
    settings.BENCH_TASK_CACHE_DIR = bench_var / "tasks"
    settings.BENCH_TASK_PACKAGES_DIR = bench_var / "task-packages"
    settings.MEDIA_ROOT = bench_var / "media"
    settings.BENCH_BLOB_DIR = bench_var / "media" / "blobs"
    (bench_var / "runs").mkdir(exist_ok=True)
    return bench_var


@pytest.fixture
def digits(db):
    """The built-in digits task, imported (not yet validated)."""
    from task_bank.services import BUILTIN_DIR, task_import

    version, _ = task_import(root=BUILTIN_DIR / "digits", source="builtin")
    return version


@pytest.fixture
def baseline_agent(db):
    from runner.agents.builtin import agents_builtin_ensure

    return next(a for a in agents_builtin_ensure() if a.name == "baseline")


@pytest.fixture
def tiny_task(db, tmp_path):
    """A task that runs in a blink: train.py writes a number, eval.py reads it. Import returns the version."""
    from task_bank.services import task_import

    root = package_write(tmp_path / "tiny")
    version, _ = task_import(root=root, slug="tiny")
    return version


@pytest.fixture
def tiny_task_ready(tiny_task):
    """The tiny task as validation leaves it: ready, its baseline (train.py writes 2) measured."""
    tiny_task.status, tiny_task.baseline_score = tiny_task.Status.READY, 2.0
    tiny_task.save(update_fields=["status", "baseline_score"])
    return tiny_task


@pytest.fixture
def llm_server():
    from tests.llm_server import FakeOpenAI

    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def endpoint(db, llm_server, settings):
    """A model endpoint named "test-model" on the scripted server, priced 1 and 2 per million tokens."""
    from runner.models import ModelEndpoint

    settings.BENCH_LLM_BACKOFF_S = 0.01
    return ModelEndpoint.objects.create(
        name="test-model",
        base_url=llm_server.base_url,
        model_id="scripted-1",
        price_input_per_mtok=1,
        price_output_per_mtok=2,
        timeout_s=5,
    )


@pytest.fixture
def people(db, django_user_model) -> dict:
    """Signed-up users: "owner" (of private_agent), "stranger" (anyone else) and "staff"."""
    return {
        "owner": django_user_model.objects.create_user("owner", password="x"),
        "stranger": django_user_model.objects.create_user("stranger", password="x"),
        "staff": django_user_model.objects.create_user("curator", password="x", is_staff=True),
    }


@pytest.fixture
def private_agent(people):
    from tests.factories import AgentFactory

    return AgentFactory(name="hidden-hand", owner=people["owner"], visibility="private")


@pytest.fixture
def private_run(tiny_task, private_agent):
    """An ended run of the private agent that succeeded with a score of 9, and one step whose workspace holds
    notes.txt."""
    from runner.workspace.snapshots import BlobStore
    from tests.factories import RunFactory, StepFactory

    store = BlobStore()
    notes = b"the secret plan\n"
    snapshot = store.manifest_save({"notes.txt": [store.put_bytes(notes), len(notes)]})
    run = RunFactory(
        task_version=tiny_task, agent=private_agent, succeeded=True, improvement=3.5, final_score=9.0, steps_count=1
    )
    StepFactory(run=run, index=0, action="Write File", observation="notes.txt written", snapshot=snapshot)
    return run


@pytest.fixture
def public_run(tiny_task):
    """An ended run of a public agent ("open-book") that did not succeed, with a score of 1."""
    from tests.factories import AgentFactory, RunFactory

    return RunFactory(
        task_version=tiny_task, agent=AgentFactory(name="open-book"), succeeded=False, improvement=-0.5, final_score=1.0
    )


@pytest.fixture(params=["anonymous", "stranger", "owner", "staff"])
def viewer(request, client, people) -> SimpleNamespace:
    """A test client for each kind of visitor in turn; ``may_see`` says whether the access rule shows them
    private_agent, its runs and steps (only its owner and staff)."""
    if request.param != "anonymous":
        client.force_login(people[request.param])
    return SimpleNamespace(client=client, who=request.param, may_see=request.param in ("owner", "staff"))


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """Each isolating sandbox backend this machine has ("bwrap", "docker"); the others are skipped with why."""
    skip_unless_backend(request.param)
    return request.param
