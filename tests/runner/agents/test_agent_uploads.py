"""Agent uploads on the site and the API: checked as import_agent checks a package, stored by digest, a name kept to
its owner, and smoke-tested in the real bwrap sandbox by its job (the agent must answer its first message in time),
never within the upload's request."""

import io
import re
import tempfile
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import DataError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.shared_cache import counts_clear
from runner.agents import packages as agent_packages
from runner.agents.packages import AgentPackageError, agent_import, agent_manifest_parse, agent_upload
from runner.agents.smoke import SMOKE_MAX_ATTEMPTS, agent_smoke_run
from runner.agents.submissions import submission_create
from runner.execution.reaper import smokes_resend
from runner.jobs import JOB_GRACE_S, smoke_test_time_limit_s
from runner.models import Agent, RunSpec
from runner.services import RunRequestError
from runner.throttles import AgentUploadThrottle
from tests.brokers import use_broker
from tests.factories import AgentFactory, RunFactory
from tests.integration.conftest import REDIS_URL
from tests.task_bank.test_curation import ZIP_TRICKS

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "example-agent"


def agent_zip(files: dict[str, str | bytes], *, name: str = "agent.zip") -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for rel, text in files.items():
            archive.writestr(f"agent/{rel}", text)
    return SimpleUploadedFile(name, buffer.getvalue(), content_type="application/zip")


def example_zip(**changes: str) -> SimpleUploadedFile:
    files = {path.name: path.read_text() for path in EXAMPLE.iterdir()}
    for key, value in changes.items():
        files["agent.toml"] = files["agent.toml"].replace(f'{key} = "{_toml(files, key)}"', f'{key} = "{value}"')
    return agent_zip(files)


def _toml(files: dict[str, str], key: str) -> str:
    line = next(line for line in files["agent.toml"].splitlines() if line.startswith(f"{key} ="))
    return line.split('"')[1]


def leftovers(settings) -> set[str]:
    """What an upload could leave behind: stored packages, and its scratch files and folders."""
    stored = Path(settings.BENCH_DATA_DIR) / "agent_packages"
    scratch = Path(tempfile.gettempdir())
    return {
        *(str(p) for p in stored.glob("*")),
        *(str(p) for pattern in ("agent-upload-*", "agent-smoke-*", "task-import-*") for p in scratch.glob(pattern)),
    }


@pytest.fixture(autouse=True)
def bwrap(settings):
    settings.BENCH_SANDBOX = "bwrap"


@pytest.fixture(autouse=True)
def fresh_throttle(db):
    counts_clear()  # upload throttling counts in the shared cache


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="x")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="x")


def smoke_tested(agent: Agent) -> Agent:
    """The agent after its smoke-test job ran (as a worker runs it: tests/integration has the worker's own)."""
    agent_smoke_run(agent.pk)
    agent.refresh_from_db()
    return agent


@pytest.mark.django_db
def test_a_good_upload_is_stored_by_digest_and_smoke_tested_by_its_job_not_the_request(client, alice, settings):
    client.force_login(alice)
    answer = client.post(
        "/agents/new/", {"package": example_zip(), "description": "Mine.", "visibility": "public"}, follow=True
    )

    agent = Agent.objects.get(name="example-agent", version="1")
    assert (agent.owner, agent.kind, agent.description) == (alice, "package", "Mine.")
    assert Path(agent.package_path) == Path(settings.BENCH_DATA_DIR) / "agent_packages" / agent.package_digest
    assert (Path(agent.package_path) / "example_agent.py").is_file()
    assert answer.redirect_chain[-1][0] == "/agents/example-agent/"
    page = answer.content.decode()
    assert "example-agent@1 uploaded: its smoke test waits for a worker (shown below)" in page
    assert (agent.smoke_state, agent.smoke_tested_at, agent.smoke_attempts) == ("pending", None, 0)
    assert 'hx-trigger="every 2s"' in page and "waiting for a worker" in page  # the versions table polls

    assert smoke_tested(agent).smoke_state == "passed" and agent.smoke_attempts == 1
    versions = client.get("/agents/example-agent/?part=versions").content.decode()
    assert "passed " in versions and "every 2s" not in versions
    assert agent_smoke_run(agent.pk) == "passed" and smoke_tested(agent).smoke_attempts == 1  # a second job: nothing


@pytest.mark.django_db
def test_a_package_that_crashes_on_import_fails_its_smoke_test_with_its_error_and_gets_no_runs(
    client, alice, bob, settings, tiny_task
):
    before = leftovers(settings)
    crashing = agent_zip(
        {
            "agent.toml": 'name = "crasher"\nversion = "1"\nentrypoint = "crasher"\n',
            "crasher.py": "import mlab_agents.sdk\nraise RuntimeError('missing weights: model.bin')\n",
        }
    )
    client.force_login(alice)
    assert client.post("/agents/new/", {"package": crashing, "visibility": "public"}).status_code == 302
    agent = smoke_tested(Agent.objects.get(name="crasher"))

    assert agent.smoke_state == "failed"
    assert "the agent exited (code 1) before answering its first message" in agent.smoke_error
    assert "RuntimeError: missing weights: model.bin" in agent.smoke_error
    page = client.get("/agents/crasher/").content.decode()
    assert "failed " in page and "RuntimeError: missing weights: model.bin" in page
    client.force_login(bob)  # its stderr is its owner's (and staff's) to read
    page = client.get("/agents/crasher/").content.decode()
    assert "failed " in page and "missing weights" not in page
    assert client.get("/api/v1/agents/crasher/").json()["versions"][0]["smoke_error"] == ""
    with pytest.raises(RunRequestError, match="agent crasher@1 failed its smoke test .the agent exited"):
        submission_create(submitter=alice, spec=RunSpec(agent), tasks=[tiny_task.task])
    # Only the stored package stays: no scratch folder of the upload or the test.
    assert leftovers(settings) - before == {agent.package_path}


@pytest.mark.django_db
def test_an_agent_that_never_answers_fails_at_the_time_limit(alice, settings):
    settings.BENCH_AGENT_SMOKE_TIMEOUT_S = 1
    silent = agent_zip(
        {
            "agent.toml": 'name = "silent"\nversion = "1"\nentrypoint = "silent"\n',
            "silent.py": "import sys, time\nprint('thinking', file=sys.stderr, flush=True)\ntime.sleep(3600)\n",
        }
    )
    agent, _ = agent_upload(upload=silent, submitter=alice, visibility="public")

    assert smoke_tested(agent).smoke_state == "failed"
    assert "did not answer its first message within 1 s; its stderr ends:\nthinking" in agent.smoke_error


@pytest.mark.django_db
def test_an_answer_that_is_not_a_protocol_message_fails(alice):
    chatty = agent_zip(
        {
            "agent.toml": 'name = "chatty"\nversion = "1"\nentrypoint = "chatty"\n',
            "chatty.py": "print('hello, world', flush=True)\nimport time\ntime.sleep(60)\n",
        }
    )
    agent, _ = agent_upload(upload=chatty, submitter=alice, visibility="public")
    assert smoke_tested(agent).smoke_state == "failed"
    assert "the agent's first answer is not a protocol message: the line is not" in agent.smoke_error


@pytest.mark.django_db
def test_a_version_that_failed_is_tested_again_when_uploaded_again_with_the_same_or_new_files(alice, settings):
    broken = {
        "agent.toml": 'name = "fixer"\nversion = "1"\nentrypoint = "fixer"\n',
        "fixer.py": "raise SystemExit(3)\n",
    }
    agent, created = agent_upload(upload=agent_zip(broken), submitter=alice, visibility="public")
    assert created and smoke_tested(agent).smoke_state == "failed"
    old_folder = Path(agent.package_path)

    again, created = agent_upload(upload=agent_zip(broken), submitter=alice, visibility="public")
    assert (again.pk, created, again.smoke_state, again.smoke_error) == (agent.pk, False, "pending", "")
    assert smoke_tested(again).smoke_state == "failed"

    fixed = {**broken, "fixer.py": (EXAMPLE / "example_agent.py").read_text()}
    replaced, created = agent_upload(upload=agent_zip(fixed), submitter=alice, visibility="public")
    assert (replaced.pk, created, replaced.smoke_state) == (agent.pk, True, "pending")
    assert replaced.package_digest != agent.package_digest and not old_folder.exists()
    assert smoke_tested(replaced).smoke_state == "passed"
    with pytest.raises(AgentPackageError, match="fixer@1 already exists with other files"):  # it passed: its files stay
        agent_upload(upload=agent_zip(broken), submitter=alice, visibility="public")


@pytest.mark.django_db
def test_an_identical_reupload_is_recognised(client, alice):
    client.force_login(alice)
    client.post("/agents/new/", {"package": example_zip(), "visibility": "public"})
    again = client.post("/agents/new/", {"package": example_zip(), "visibility": "public"}, follow=True)

    assert "these files are already uploaded as example-agent@1" in again.content.decode()
    assert Agent.objects.filter(name="example-agent").count() == 1


@pytest.mark.django_db
def test_a_new_version_is_its_owners_and_nobody_elses(alice, bob):
    agent_upload(upload=example_zip(), submitter=alice, visibility="public")
    second, created = agent_upload(upload=example_zip(version="2"), submitter=alice, visibility="public")
    assert created and second.owner == alice

    with pytest.raises(AgentPackageError, match="the name 'example-agent' belongs to another submitter's agent"):
        agent_upload(upload=example_zip(version="3"), submitter=bob, visibility="public")
    assert sorted(Agent.objects.filter(name="example-agent").values_list("version", flat=True)) == ["1", "2"]


@pytest.mark.django_db
def test_a_private_agents_page_is_a_404_to_others(client, alice, bob, tiny_task):
    agent = AgentFactory(name="secret-sauce", owner=alice, visibility="private", description="Hush.")
    run = RunFactory(task_version=tiny_task, agent=agent, status="finished")

    client.force_login(alice)
    page = client.get("/agents/secret-sauce/")
    assert page.status_code == 200 and "Hush." in page.content.decode()
    assert f"/runs/{run.pk}/" in page.content.decode()
    assert "secret-sauce" in client.get("/agents/").content.decode()

    client.force_login(bob)
    assert client.get("/agents/secret-sauce/").status_code == 404
    assert "secret-sauce" not in client.get("/agents/").content.decode()
    client.logout()
    assert client.get("/agents/secret-sauce/").status_code == 404
    assert client.get("/api/v1/agents/secret-sauce/").status_code == 404


@pytest.mark.django_db
def test_an_agents_page_counts_its_ranked_runs_per_task(client, tiny_task):
    agent = AgentFactory(name="ranked")
    for succeeded in (True, False, True):
        RunFactory(task_version=tiny_task, agent=agent, status="finished", succeeded=succeeded)
    RunFactory(task_version=tiny_task, agent=agent, status="cancelled")  # not counted

    page = client.get("/agents/ranked/").content.decode()
    row = page[page.index('<table class="agent-ranked">') :].split("</tr>")[1]
    assert [cell.split("<")[0] for cell in row.split('<td class="num">')[1:]] == ["", "2"]
    assert ">3</a>" in row


@pytest.mark.django_db
def test_the_api_uploads_and_lists_agents(client, alice, bob):
    assert client.post("/api/v1/agents/", {"package": example_zip()}).status_code == 403

    client.force_login(alice)
    made = client.post("/api/v1/agents/", {"package": example_zip(), "visibility": "private"})
    assert made.status_code == 201, made.content
    assert made.json() | {"created_at": None, "package_digest": None} == {
        "name": "example-agent", "version": "1", "kind": "package", "entrypoint": "example_agent",
        "description": "Reads the starter script, runs it, and submits: the smallest agent that uses the SDK.",
        "uses_llm": False, "default_model": "", "owner": "alice", "visibility": "private", "created": True,
        "smoke_state": "pending", "smoke_error": "", "smoke_tested_at": None, "created_at": None,
        "package_digest": None,
    }  # fmt: skip
    smoke_tested(Agent.objects.get(name="example-agent"))
    again = client.post("/api/v1/agents/", {"package": example_zip(), "visibility": "private"})
    assert again.status_code == 200 and again.json()["created"] is False

    bad = client.post("/api/v1/agents/", {"package": agent_zip({"agent.toml": 'name = "x"\n'})})
    assert bad.status_code == 400
    assert "agent.toml needs entrypoint" in bad.json()["package"][0]

    AgentFactory(name="open-one", description="Public.")
    listed = client.get("/api/v1/agents/").json()
    assert {a["name"]: [v["version"] for v in a["versions"]] for a in listed["results"]} == {
        "example-agent": ["1"], "open-one": ["1"],
    }  # fmt: skip
    assert client.get("/api/v1/agents/example-agent/").json()["owner"] == "alice"

    client.force_login(bob)
    assert [a["name"] for a in client.get("/api/v1/agents/").json()["results"]] == ["open-one"]
    assert client.get("/api/v1/agents/example-agent/").status_code == 404


@pytest.mark.django_db
def test_uploads_are_throttled_per_user(client, alice, bob, monkeypatch):
    monkeypatch.setattr(AgentUploadThrottle, "THROTTLE_RATES", {"agent_uploads": "1/hour"})

    def not_a_zip() -> dict:
        return {"package": SimpleUploadedFile("a.zip", b"not a zip"), "visibility": "public"}

    client.force_login(alice)
    assert client.post("/api/v1/agents/", not_a_zip()).status_code == 400
    assert client.post("/api/v1/agents/", not_a_zip()).status_code == 429
    assert client.post("/agents/new/", not_a_zip()).status_code == 429

    client.force_login(bob)
    assert client.post("/api/v1/agents/", not_a_zip()).status_code == 400


@pytest.mark.django_db
def test_an_agent_that_uses_an_llm_is_smoke_tested_with_a_model_and_may_answer_with_a_request(alice):
    asker = agent_zip(
        {
            "agent.toml": 'name = "asker"\nversion = "1"\nentrypoint = "asker"\nuses_llm = true\n',
            "asker.py": (
                "import json, sys\n"
                "start = json.loads(sys.stdin.readline())\n"
                "fast = start['run']['models']['fast']  # a run of an LLM agent always has its models\n"
                "assert 'Understand File' in [a['name'] for a in start['actions']]\n"
                "print(json.dumps({'type': 'llm', 'model': fast, 'messages': [{'role': 'user', 'content': 'hi'}]}))\n"
                "sys.stdout.flush()\n"
                "sys.stdin.readline()\n"
            ),
        }
    )
    agent, created = agent_upload(upload=asker, submitter=alice, visibility="public")
    assert created and agent.uses_llm
    assert smoke_tested(agent).smoke_state == "passed", agent.smoke_error


@pytest.mark.django_db
def test_the_agent_pages_cost_the_same_queries_however_many_agents(client, alice, tiny_task):
    def make(n: int) -> None:
        for i in range(n):
            agent = AgentFactory(name=f"many-{n}-{i}", owner=alice)
            AgentFactory(name=agent.name, version="2", owner=alice)
            RunFactory(task_version=tiny_task, agent=agent, status="finished", succeeded=True)

    def counts() -> list[int]:
        found = []
        for url in ("/agents/", "/api/v1/agents/", "/agents/many-1-0/"):
            with CaptureQueriesContext(connection) as queries:
                assert client.get(url).status_code == 200
            found.append(len(queries))
        return found

    make(1)
    few = counts()
    make(12)
    assert counts() == few


@pytest.mark.django_db
def test_the_admins_add_agent_form_shows_no_digest_or_path_fields_and_points_to_uploads(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("curator", password="x", is_staff=True, is_superuser=True))
    page = client.get("/admin/runner/agent/add/").content.decode()

    assert 'name="name"' in page and 'name="visibility"' in page
    assert 'name="package_digest"' not in page and 'name="package_path"' not in page
    assert '<a href="/agents/new/">upload it</a>' in page


@pytest.mark.django_db
def test_import_agent_smoke_tests_on_request_and_the_upload_pages_name_is_reserved(tmp_path, settings):
    crasher = tmp_path / "crasher"
    crasher.mkdir()
    (crasher / "agent.toml").write_text('name = "crasher"\nentrypoint = "crasher"\n')
    (crasher / "crasher.py").write_text("raise SystemExit('no weights here')\n")
    with pytest.raises(
        CommandError,
        match="crasher@1 is stored but failed its smoke test: the agent exited .code 1.(.|\n)*no weights here",
    ):
        call_command("import_agent", str(crasher), "--smoke-test")
    assert Agent.objects.get(name="crasher").smoke_state == "failed"

    (crasher / "agent.toml").write_text('name = "new"\nentrypoint = "crasher"\n')
    with pytest.raises(CommandError, match="agent name 'new' is reserved"):
        call_command("import_agent", str(crasher))


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    """A temporary folder of this test's own for the upload's scratch files, so that leftovers sees only those."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


MINIMAL = {"agent.toml": 'name = "tricky"\nversion = "1"\nentrypoint = "main"\n', "main.py": "print(1)\n"}


def refused_upload(client, package: SimpleUploadedFile) -> str:
    """POST the package to the API: it must be a 400; returns its message."""
    answer = client.post("/api/v1/agents/", {"package": package, "visibility": "public"})
    assert answer.status_code == 400, answer.content
    return answer.json()["package"][0]


@pytest.mark.parametrize(("trick", "message"), ZIP_TRICKS)
@pytest.mark.django_db
def test_an_upload_with_an_encrypted_member_or_one_named_dot_is_a_400(client, alice, settings, scratch, trick, message):
    before = leftovers(settings)
    package = SimpleUploadedFile("agent.zip", trick(agent_zip(MINIMAL).read()), content_type="application/zip")
    client.force_login(alice)

    assert re.search(message, refused_upload(client, package))
    assert not Agent.objects.exists()
    assert leftovers(settings) == before


LONG = "x" * 5001


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (
            b'name = "x"\nentrypoint = "main"\ndescription = "caf\xe9"\n',
            "agent.toml is not UTF-8 text (byte 49 is 0xe9)",
        ),
        (f'name = "x"\nentrypoint = "main"\nversion = "{"9" * 41}"\n', "version is 41 characters long; at most 40"),
        ('name = "x"\nentrypoint = "main"\nversion = { major = 1 }\n', "version is a table; expected a non-empty"),
        ('name = "x"\nentrypoint = "main"\nversion = [1, 2]\n', "version is an array; expected a non-empty"),
        ('name = "x"\nentrypoint = "main"\nversion = ""\n', "version is an empty string; expected a non-empty"),
        (f'name = "x"\nentrypoint = "main"\ndefault_model = "{LONG[:201]}"\n', "default_model is 201 characters"),
        (f'name = "x"\nentrypoint = "main"\ndescription = "{LONG}"\n', "description is 5001 characters long; at"),
        (f'name = "x"\nentrypoint = "{LONG[:201]}"\n', "entrypoint is 201 characters long; at most 200"),
        ('name = "x"\nentrypoint = "main"\ndescription = 3\n', "description is a number; expected a string"),
        ('name = "x"\nentrypoint = "main"\nuses_llm = "yes"\n', "uses_llm is a string; expected true or false"),
        ('name = "x"\nentrypoint = "main"\n[config]\nsince = 2024-01-01T00:00:00\n', "config.since is a TOML date"),
        ('name = "x"\nentrypoint = "main"\n[config.search]\nwidth = nan\n', "config.search.width is nan; [config]"),
    ],
)
@pytest.mark.django_db
def test_an_agent_toml_with_a_bad_value_is_a_400_naming_the_key(client, alice, settings, scratch, manifest, message):
    before = leftovers(settings)
    client.force_login(alice)

    assert message in refused_upload(client, agent_zip(MINIMAL | {"agent.toml": manifest}))
    assert not Agent.objects.exists()
    assert leftovers(settings) == before


@pytest.mark.parametrize(
    ("config", "path"),
    [
        ('[config.llm]\nmodel = "gpt-4"\n', "config.llm.model"),
        ('[config.a.b.c]\nbase_url = "http://x"\n', "config.a.b.c.base_url"),
        ('[[config.tools]]\nname = "search"\n[[config.tools]]\napi_key = "k"\n', "config.tools[1].api_key"),
        ('[config]\nsteps = [[{ endpoint = "x" }]]\n', "config.steps[0][0].endpoint"),
    ],
)
@pytest.mark.django_db
def test_a_model_or_endpoint_key_at_any_depth_of_config_is_a_400_naming_its_path(client, alice, config, path):
    manifest = 'name = "x"\nentrypoint = "main"\n' + config
    client.force_login(alice)

    assert f"agent.toml: {path} would choose a model or an endpoint" in refused_upload(
        client, agent_zip(MINIMAL | {"agent.toml": manifest})
    )


def test_nested_config_without_model_keys_and_a_number_version_are_accepted():
    data = agent_manifest_parse(
        'name = "x"\nentrypoint = "main"\nversion = 2\n[config.search]\ndepth = 3\n[[config.tools]]\nname = "grep"\n'
    )
    assert data["version"] == "2"
    assert data["config"] == {"search": {"depth": 3}, "tools": [{"name": "grep"}]}


@pytest.mark.django_db
def test_an_agent_package_over_the_unpacked_limit_is_refused_zipped_or_as_a_folder(
    client, alice, settings, scratch, tmp_path
):
    settings.BENCH_AGENT_MAX_UNPACKED_BYTES = 1_000_000
    before = leftovers(settings)
    zeros = MINIMAL | {"weights.bin": b"\0" * 2_000_000}  # about 2 kB zipped
    client.force_login(alice)

    message = refused_upload(client, agent_zip(zeros))
    assert "at most 1000000 bytes are allowed (BENCH_AGENT_MAX_UNPACKED_BYTES)" in message
    assert not Agent.objects.exists()
    assert leftovers(settings) == before

    folder = tmp_path / "big"
    folder.mkdir()
    for rel, content in zeros.items():
        (folder / rel).write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(CommandError, match=r"at most 1000000 are allowed \(BENCH_AGENT_MAX_UNPACKED_BYTES\)"):
        call_command("import_agent", str(folder))
    assert leftovers(settings) == before


@pytest.mark.django_db
def test_a_row_the_database_refuses_leaves_no_package_folder(settings, scratch, tmp_path, monkeypatch):
    monkeypatch.setitem(agent_packages.MAX_LENGTHS, "version", 100)  # past the column's 40: the database refuses
    before = leftovers(settings)
    folder = tmp_path / "long"
    folder.mkdir()
    (folder / "agent.toml").write_text(f'name = "long"\nversion = "{"9" * 60}"\nentrypoint = "main"\n')
    (folder / "main.py").write_text("print(1)\n")

    with pytest.raises(DataError):
        agent_import(source=folder)
    assert not Agent.objects.exists()
    assert leftovers(settings) == before


@pytest.mark.django_db(transaction=True)
def test_the_reaper_sends_a_smoke_test_never_sent_or_sent_longer_ago_than_it_can_last(alice, broker_down):
    agent, _ = agent_upload(upload=example_zip(), submitter=alice, visibility="public")  # the queue is down: kept
    assert agent.smoke_state == "pending" and agent.smoke_sent_at is None

    assert smokes_resend(resend_after_s=3600) == []  # not waited long enough yet
    assert smokes_resend(resend_after_s=0) == []  # the queue is still down
    use_broker(REDIS_URL)
    assert smokes_resend(resend_after_s=0) == [agent.pk]
    assert Agent.objects.get(pk=agent.pk).smoke_sent_at is not None
    assert smokes_resend(resend_after_s=0) == []  # sent just now: its job may be at work

    lasted = timedelta(seconds=smoke_test_time_limit_s() + 2 * JOB_GRACE_S + 1)
    Agent.objects.filter(pk=agent.pk).update(smoke_sent_at=timezone.now() - lasted)
    assert smokes_resend(resend_after_s=0) == [agent.pk]  # lost: it would have ended by now

    assert smoke_tested(agent).smoke_state == "passed"
    Agent.objects.filter(pk=agent.pk).update(smoke_sent_at=timezone.now() - lasted)
    assert smokes_resend(resend_after_s=0) == []  # tested: nothing waits


@pytest.mark.django_db
def test_a_smoke_test_started_again_and_again_by_lost_workers_fails_saying_so(alice):
    agent, _ = agent_upload(upload=example_zip(), submitter=alice, visibility="public")
    Agent.objects.filter(pk=agent.pk).update(smoke_attempts=SMOKE_MAX_ATTEMPTS)  # each start's worker was lost

    assert smoke_tested(agent).smoke_state == "failed"
    assert agent.smoke_error.startswith(f"the smoke test was started {SMOKE_MAX_ATTEMPTS} times and never ended")
