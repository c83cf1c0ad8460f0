"""The containment suite: each test is an attack from issue 10's table, and passes only when it is stopped.

Uploaded agents get nothing they were not given; hostile names and sizes are data, not crashes; the worker never
loads an untrusted file whole; snapshots cannot be fooled; a workspace no walk can cover fails closed."""

import functools
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from runner.actions import Environment
from runner.agents.packages import AgentPackageError, agent_import
from runner.execution import run_execute
from runner.models import Agent, LLMCall, ModelEndpoint, Step
from runner.services import run_create
from runner.workspace import fs
from runner.workspace.snapshots import BlobStore, Snapshotter, manifest_restore
from task_bank.package import TaskPackageError
from task_bank.services import task_import_source
from tests.factories import AgentFactory, package_write

bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.fixture
def make_env(make_env, backend):
    """The Environment maker of tests/runner/conftest.py, in each isolating backend this machine has."""
    return functools.partial(make_env, sandbox=backend)


def llm(messages_text: str, **extra) -> dict:
    return {"type": "llm", "messages": [{"role": "user", "content": messages_text}], "purpose": "probe", **extra}


def agent_answers(run) -> list[str]:
    """What the scripted agent was answered, in order (it prints the first 300 characters of each to its log)."""
    return [line[len("answer: ") :] for line in run.stderr_tail.splitlines() if line.startswith("answer: {")]


# -- uploaded agents get nothing they were not given ------------------------------------------------------------


@pytest.fixture
def paid(db, llm_server):
    """An expensive endpoint the platform has configured, which nobody gave the runs below."""
    return ModelEndpoint.objects.create(
        name="paid", base_url=llm_server.base_url, model_id="scripted-paid", timeout_s=5
    )


@pytest.mark.django_db
def test_an_agent_package_whose_config_names_a_model_is_refused_at_import(tmp_path):
    root = tmp_path / "greedy"
    root.mkdir()
    (root / "agent.toml").write_text(
        'name = "greedy"\nentrypoint = "main"\nuses_llm = true\n[config]\nfast_model = "paid"\ntemperature = 0.1\n'
    )
    (root / "main.py").write_text("print('hi')\n")
    with pytest.raises(AgentPackageError, match=r"config\.fast_model would choose a model or an endpoint"):
        agent_import(source=root)
    for key in ("edit_model", "base_url", "api_key_env", "summary_endpoint"):
        (root / "agent.toml").write_text(f'name = "greedy"\nentrypoint = "main"\n[config]\n{key} = "x"\n')
        with pytest.raises(AgentPackageError, match=key):
            agent_import(source=root)
    assert not Agent.objects.filter(name="greedy").exists()


@pytest.mark.django_db
def test_a_packages_default_model_does_not_give_a_run_started_without_one_a_model(tmp_path, tiny_task, paid):
    root = tmp_path / "suggests"
    root.mkdir()
    (root / "agent.toml").write_text('name = "suggests"\nentrypoint = "main"\ndefault_model = "paid"\n')
    (root / "main.py").write_text("print('hi')\n")
    agent, _ = agent_import(source=root)

    run = run_create(task=tiny_task.task, agent=agent, enqueue=False)

    assert run.model == "" and run.models_allowed == {}


@bwrap
@pytest.mark.django_db(transaction=True)
def test_an_uploaded_agent_asking_for_a_model_it_was_not_given_is_refused_and_nothing_reaches_it(
    tiny_task, endpoint, paid, llm_server
):
    llm_server.default = lambda request: "fine"
    # An agent stored before packages were checked, whose config still names the paid endpoint.
    script = [
        llm("use the paid one", model="paid"),
        llm("and the run's own", model="test-model"),
        {"type": "act", "action": "Reflection", "input": {"things_to_reflect_on": "anything"}},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]
    agent = AgentFactory(config={"script": script, "fast_model": "paid", "edit_model": "paid"})

    run = run_execute(run_create(task=tiny_task.task, agent=agent, model="test-model", enqueue=False).pk)

    assert run.status == "finished", run.error
    refused, allowed = agent_answers(run)[:2]
    assert '"type": "error"' in refused and "may use only the models it was started with" in refused
    assert "'paid'" in refused and json.loads(allowed)["type"] == "completion"
    # The Reflection action ran on the run's model, not the one the agent's config names.
    assert [r["model"] for r in llm_server.requests] == ["scripted-1", "scripted-1"]
    answered = LLMCall.objects.filter(run=run, error="")
    assert set(answered.values_list("endpoint", flat=True)) == {"test-model"} and answered.count() == 2
    # The attempt is on the record: the trace shows what the agent asked for, and that it was refused.
    refusal = LLMCall.objects.get(run=run, model="paid")
    assert refusal.error.startswith("refused, no endpoint called") and refusal.tokens_in == refusal.cost == 0


@bwrap
@pytest.mark.django_db(transaction=True)
def test_a_run_started_without_a_model_makes_no_llm_call_at_all(tiny_task, endpoint, paid, llm_server):
    script = [
        llm("anything", model="paid"),
        llm("anything"),
        {"type": "act", "action": "Reflection", "input": {"things_to_reflect_on": "anything"}},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]
    agent = AgentFactory(config={"script": script, "fast_model": "paid"}, default_model="paid")

    run = run_execute(run_create(task=tiny_task.task, agent=agent, enqueue=False).pk)

    assert run.status == "finished", run.error
    first, second = agent_answers(run)[:2]
    assert all('"type": "error"' in a and "this run has no model" in a for a in (first, second))
    reflection = Step.objects.get(run=run, index=0)
    assert reflection.observation.startswith("Invalid action: Reflection")
    assert llm_server.requests == []  # no endpoint saw anything; the two refusals are on the record
    calls = LLMCall.objects.filter(run=run)
    assert calls.count() == 2 and all(c.error.startswith("refused") and c.tokens_in == 0 for c in calls)


@pytest.mark.django_db
def test_the_runs_starter_chooses_the_fast_and_edit_models(tiny_task, endpoint, paid):
    from runner.execution.action_llm import action_model
    from runner.services import RunRequestError

    run = run_create(task=tiny_task.task, agent=AgentFactory(), model="test-model", fast_model="paid", enqueue=False)
    assert run.models_allowed == {"main": "test-model", "fast": "paid", "edit": "paid"}
    assert action_model(run, "reflection") == "paid" and action_model(run, "edit script") == "paid"
    with pytest.raises(RunRequestError, match="needs a main model"):
        run_create(task=tiny_task.task, agent=AgentFactory(), fast_model="paid", enqueue=False)
    with pytest.raises(RunRequestError, match="no enabled model endpoint named 'elsewhere'"):
        run_create(task=tiny_task.task, agent=AgentFactory(), model="test-model", edit_model="elsewhere")


# -- hostile names and sizes are data, not crashes -------------------------------------------------------------


def zip_with(names: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in names.items():
            archive.writestr(name, text)
    return buffer.getvalue()


@pytest.mark.django_db
def test_a_zip_member_name_over_255_bytes_is_a_package_error_for_tasks_and_agents(tmp_path):
    long_name = "a" * 300 + ".txt"
    root = package_write(tmp_path / "tiny")
    members = {f"tiny/{p.relative_to(root).as_posix()}": p.read_text() for p in root.rglob("*") if p.is_file()}
    (tmp_path / "task.zip").write_bytes(zip_with({**members, f"tiny/env/{long_name}": "x"}))
    with pytest.raises(TaskPackageError, match="a name over 255 bytes"):
        task_import_source(source=tmp_path / "task.zip", slug="long")

    agent_files = {"agent/agent.toml": 'name = "longname"\nentrypoint = "main"\n', "agent/main.py": "print(1)\n"}
    (tmp_path / "agent.zip").write_bytes(zip_with({**agent_files, f"agent/{long_name}": "x"}))
    with pytest.raises(AgentPackageError, match="a name over 255 bytes"):
        agent_import(source=tmp_path / "agent.zip")
    (tmp_path / "deep.zip").write_bytes(zip_with({**agent_files, "agent/" + "d/" * 600 + "x.txt": "x"}))
    with pytest.raises(AgentPackageError, match="over 1024 bytes"):
        agent_import(source=tmp_path / "deep.zip")


def test_list_files_shows_a_name_that_is_not_utf8_escaped(make_env):
    env = make_env({"make.py": "open(b'bad\\xffname.txt', 'w').write('x')\n"})
    env.execute("Execute Script", {"script_name": "make.py"})

    outcome = env.execute("List Files", {"dir_path": "."})

    assert not outcome.error
    assert "bad\\xffname.txt" in outcome.observation
    outcome.observation.encode("utf-8")  # text a database and a page can hold


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_script_makes_a_name_that_is_not_utf8_goes_on_and_its_pages_show_it(
    client, tiny_task, backend, settings
):
    settings.BENCH_SANDBOX = backend
    script = [
        {
            "type": "act",
            "action": "Write File",
            "input": {"file_name": "make.py", "content": "open(b'bad\\xff.txt', 'w')"},
        },
        {"type": "act", "action": "Execute Script", "input": {"script_name": "make.py"}},
        {"type": "act", "action": "List Files", "input": {"dir_path": "."}},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]
    run = run_execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)

    assert run.status == "finished", run.error
    assert "bad\\xff.txt" in Step.objects.get(run=run, index=2).observation
    files = client.get(f"/runs/{run.pk}/steps/2/files/")
    changes = client.get(f"/runs/{run.pk}/steps/1/changes/")
    assert files.status_code == changes.status_code == 200
    assert "bad\\xff.txt" in files.content.decode() and "bad\\xff.txt" in changes.content.decode()
    assert client.get(f"/runs/{run.pk}/steps/2/files/", {"path": "bad\\xff.txt"}).status_code == 200
    assert client.get(f"/runs/{run.pk}/trace.json").status_code == 200


@pytest.mark.django_db
def test_the_files_and_changes_pages_of_a_200000_file_step_are_pages_of_bounded_size(client, tiny_task):
    from tests.factories import RunFactory, StepFactory

    store = BlobStore()
    sha = store.put_bytes(b"line\n" * 1000)
    manifest = {f"dir{i // 1000}/file{i:06d}.txt": [sha, 5000] for i in range(200_000)}
    run = RunFactory(task_version=tiny_task, initial_snapshot=store.manifest_save({}), steps_count=1)
    StepFactory(run=run, index=0, snapshot=store.manifest_save(manifest))

    files = client.get(f"/runs/{run.pk}/steps/0/files/")
    changes = client.get(f"/runs/{run.pk}/steps/0/changes/")
    last = client.get(f"/runs/{run.pk}/steps/0/files/", {"page": "400"})

    assert files.status_code == changes.status_code == last.status_code == 200
    assert len(files.content) < 200_000 and len(changes.content) < 1_200_000  # not 20 MB and 33 MB
    assert "200000 files · page 1 of 400" in files.content.decode()
    assert (
        files.content.decode().count('<li><a href="?path=') == 500 and "dir99/file099999.txt" in last.content.decode()
    )
    assert "200000 files changed · page 1 of 2000" in changes.content.decode()
    assert changes.content.decode().count('class="change-added"') == 100


# -- the worker never loads an untrusted file whole ------------------------------------------------------------

SPARSE_COPY = """
import os, resource, sys
import django
django.setup()
from runner.actions import Environment
from runner.execution.sandboxes import get_sandbox
from runner.workspace.snapshots import BlobStore, Snapshotter

workspace = sys.argv[1]
env = Environment(workspace=workspace, sandbox=get_sandbox("local"), workspace_limit_mb=0)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)  # the worker's own code, loaded
for destination in ("copy.bin", "copy.bin"):  # the second copy also keeps a backup of the first
    outcome = env.execute("Copy File", {"source": "sparse.bin", "destination": destination})
    assert not outcome.error, outcome.observation
Snapshotter(env.workspace, BlobStore(sys.argv[2])).take()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def allocated_mb(root) -> float:
    return sum(os.lstat(p).st_blocks * 512 for p in root.rglob("*") if p.is_file()) / (1 << 20)


def test_copy_file_backup_and_snapshot_of_a_multi_gb_sparse_file_keep_the_workers_memory_and_disk_bounded(tmp_path):
    workspace, blobs = tmp_path / "ws", tmp_path / "blobs"
    workspace.mkdir()
    with open(workspace / "sparse.bin", "wb") as fh:
        fh.write(b"head")
        fh.truncate(2 << 30)  # 2 GiB (the most Copy File takes), nearly all hole
        fh.seek((2 << 30) - 4)
        fh.write(b"tail")
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="bench.settings", PYTHONPATH=str(django_settings.BASE_DIR))
    done = subprocess.run(
        [sys.executable, "-c", SPARSE_COPY, str(workspace), str(blobs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=django_settings.BASE_DIR,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded_mb, peak_mb = map(int, done.stdout.split()[-2:])
    # What copying, backing up and snapshotting 2 GiB added to the worker's own code: a quarter of the file at
    # most (reading it whole adds 2,048 MB or more; streaming it added about 1 MB in a run of this file alone, and
    # in one full-suite run on a loaded machine the whole process peaked at 469 MB).
    assert peak_mb - loaded_mb < 512, f"the worker's memory grew from {loaded_mb} to {peak_mb} MB"
    copies = [workspace / "copy.bin", *(workspace / "backup").iterdir()]
    assert len(copies) == 2 and all(p.stat().st_size == 2 << 30 for p in copies)
    assert (workspace / "copy.bin").read_bytes()[:4] == b"head"
    assert allocated_mb(workspace) < 50 and allocated_mb(blobs) < 50  # holes stay holes


# -- snapshots that cannot be fooled ---------------------------------------------------------------------------


def test_a_same_size_same_mtime_rewrite_by_sandboxed_code_changes_the_snapshot(make_env, tmp_path):
    env = make_env({"train.py": "EPOCHS = 1\n"})
    store = BlobStore(tmp_path / "blobs")
    snapshotter = Snapshotter(env.workspace, store)
    _, before = snapshotter.take()
    forge = textwrap.dedent("""
        import os
        st = os.stat("train.py")
        with open("train.py", "r+") as fh:
            fh.write("EPOCHS = 9\\n")
        os.utime("train.py", ns=(st.st_atime_ns, st.st_mtime_ns))
        print("forged")
    """)
    (env.workspace / "forge.py").write_text(forge)
    assert "forged" in env.execute("Execute Script", {"script_name": "forge.py"}).observation
    assert fs.stat_key(os.stat(env.workspace / "train.py")) == snapshotter._known["train.py"][0]  # forged key

    _, after = snapshotter.take()

    assert after["train.py"][0] != before["train.py"][0]
    assert store.read_bytes(after["train.py"][0]) == b"EPOCHS = 9\n"


def test_a_repl_thread_rewriting_a_file_unseen_between_steps_still_changes_the_next_snapshot(make_env, tmp_path):
    env = make_env({"train.py": "EPOCHS = 1\n"})
    snapshotter = Snapshotter(env.workspace, BlobStore(tmp_path / "blobs"))
    snapshotter.take()
    command = (
        "import os, threading, time\n"
        "def forge():\n"
        "    time.sleep(1)\n"
        "    st = os.stat('train.py')\n"
        "    with open('train.py', 'r+') as fh:\n"
        "        fh.write('EPOCHS = 7\\n')\n"
        "    os.utime('train.py', ns=(st.st_atime_ns, st.st_mtime_ns))\n"
        "threading.Thread(target=forge).start()\n"
        "print('armed')"
    )
    assert "armed" in env.execute("Python REPL", {"command": command}).observation
    _, after_repl = snapshotter.take(full=env.sandbox_may_have_written())
    while (env.workspace / "train.py").read_text() != "EPOCHS = 7\n":  # pytest's timeout bounds a hang
        time.sleep(0.1)
    env.execute("List Files", {"dir_path": "."})  # a file action: only the REPL left alive could have written

    _, after_listing = snapshotter.take(full=env.sandbox_may_have_written())

    assert after_listing["train.py"] != after_repl["train.py"]
    env.close()


def test_a_restored_read_only_file_is_not_hashed_again_but_a_writable_one_is(tmp_path):
    store = BlobStore(tmp_path / "blobs")
    src = tmp_path / "src"
    src.mkdir()
    (src / "data.bin").write_bytes(b"d" * 1000)
    (src / "train.py").write_text("v1\n")
    _, manifest = Snapshotter(src, store).take()
    snapshotter = manifest_restore(manifest, tmp_path / "ws", store, link={"data.bin"})
    os.chmod(tmp_path / "ws" / "train.py", 0o644)
    key = fs.stat_key(os.stat(tmp_path / "ws" / "train.py"))
    with open(tmp_path / "ws" / "train.py", "r+") as fh:
        fh.write("v2\n")
    os.utime(tmp_path / "ws" / "train.py", ns=(key[2], key[2]))

    _, after = snapshotter.take()

    assert after["data.bin"] == manifest["data.bin"] and after["train.py"] != manifest["train.py"]


# -- a workspace no walk can cover fails closed ----------------------------------------------------------------


@bwrap
@pytest.mark.django_db(transaction=True)
def test_files_nested_deeper_than_a_walk_goes_end_the_run_at_a_limit_not_uncounted(tiny_task):
    nest = (
        "import os\nfor i in range(80):\n    os.mkdir('d')\n    os.chdir('d')\nopen('big.bin', 'wb').write(b'x' * 1000)"
    )
    script = [
        {"type": "act", "action": "Write File", "input": {"file_name": "nest.py", "content": nest}},
        {"type": "act", "action": "Execute Script", "input": {"script_name": "nest.py"}},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]
    run = run_execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)

    assert (run.status, run.failure_kind) == ("failed", "limit")
    assert "nested more than 64 deep" in run.error
    assert not Step.objects.filter(run=run, action="Final Answer").exists()


def test_more_files_than_a_walk_covers_is_an_error_not_a_snapshot_with_files_missing(make_env, monkeypatch):
    monkeypatch.setattr(fs, "MAX_FILES", 50)
    env = make_env({"many.py": "for i in range(60):\n    open(f'f{i}.txt', 'w').write('x')\n"})
    with pytest.raises(fs.WalkLimitError, match="more than 50 files"):
        env.execute("Execute Script", {"script_name": "many.py"})
    with pytest.raises(fs.WalkLimitError, match="more than 50 files"):
        Snapshotter(env.workspace, BlobStore()).take()


# -- a workspace is a sized filesystem -------------------------------------------------------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a sized workspace is mounted by a root worker")


@pytest.fixture(params=["ext4", "tmpfs"])
def sized_env(request, tmp_path, backend):
    """An Environment on a sized workspace (20 MB, 500 inodes) of each kind, in each isolating backend; unmounted
    afterwards."""
    from runner.actions import Environment
    from runner.execution.sandboxes import get_sandbox
    from runner.workspace.mounts import remove_tree, workspace_layout

    workspace = tmp_path / "run" / "workspace-1"
    box = get_sandbox(backend)
    workspace_layout(
        {}, workspace, BlobStore(tmp_path / "blobs"), read_only=set(), sandbox=box, filesystem=request.param,
        limit_mb=20, max_files=500,
    )  # fmt: skip
    env = Environment(workspace=workspace, sandbox=box, python=box.python, workspace_limit_mb=20)
    yield env
    env.close()
    remove_tree(workspace)
    assert not workspace.exists() and not list((tmp_path / "run").iterdir())  # mounts and support folders gone


def write_and_run(env, name: str, source: str):
    (env.workspace / name).write_text(textwrap.dedent(source))
    return env.execute("Execute Script", {"script_name": name})


def used_mb(env) -> float:
    return sum(os.lstat(p).st_blocks * 512 for p in env.workspace.rglob("*") if p.is_file()) / (1 << 20)


@needs_root
def test_a_repl_background_writer_is_stopped_by_the_kernel_at_the_limit_and_the_agent_can_delete_files(sized_env):
    env = sized_env
    started = env.execute(
        "Python REPL",
        {
            "command": "import threading, time\n"
            "def fill():\n"
            "    with open('fill.bin', 'wb') as fh:\n"
            "        while True:\n"
            "            fh.write(b'x' * (1 << 20)); fh.flush(); time.sleep(0.01)\n"
            "threading.Thread(target=fill, daemon=True).start()\n"
            "print('writer started')"
        },
    )
    assert "writer started" in started.observation
    waited = write_and_run(
        env,
        "wait.py",
        """
        import os, time
        for _ in range(600):  # until the writer stops growing: the kernel refused its next write
            before = os.path.getsize('fill.bin')
            time.sleep(0.2)
            if os.path.getsize('fill.bin') == before:
                break
        print('settled at', os.path.getsize('fill.bin') // (1 << 20), 'MB')
        """,
    )
    assert "settled at" in waited.observation
    assert used_mb(env) <= 21  # never over the 20 MB limit, whatever the thread does
    # The disk is full (not even a script can be written), yet the agent can delete: here from the REPL.
    freed = env.execute(
        "Python REPL", {"command": "import os\nos.remove('fill.bin')\nopen('small.txt', 'w').write('ok')"}
    )
    assert not freed.error and (env.workspace / "small.txt").read_text() == "ok"


@needs_root
def test_deep_nesting_more_files_and_sparse_files_cannot_pass_the_sized_workspace(sized_env):
    env = sized_env
    scripts = {  # written first: a full disk has no room for another script
        "deep.py": """
            import os
            for i in range(40):
                os.mkdir('d'); os.chdir('d')
            try:
                with open('big.bin', 'wb') as fh:
                    for _ in range(100):
                        fh.write(b'y' * (1 << 20))
            except OSError as exc:
                print('refused', exc.errno)
        """,
        "many.py": """
            made = 0
            try:
                for i in range(2000):
                    open(f'f{i}.txt', 'w').close(); made += 1
            except OSError as exc:
                print('refused after', made, 'files', exc.errno)
        """,
        "sparse.py": """
            for name in ('a.bin', 'b.bin'):
                with open(name, 'wb') as fh:
                    fh.truncate(1 << 30)
            print('sparse ok')
        """,
        "fill.py": """
            try:
                with open('a.bin', 'r+b') as fh:
                    for _ in range(100):
                        fh.write(b'z' * (1 << 20))
            except OSError as exc:
                print('refused', exc.errno)
        """,
        "clean.py": """
            import glob, os, shutil
            shutil.rmtree('d', ignore_errors=True)
            for path in glob.glob('f*.txt') + glob.glob('*.bin'):
                os.remove(path)
        """,
    }
    for name, source in scripts.items():
        (env.workspace / name).write_text(textwrap.dedent(source))

    def run(name: str) -> str:
        return env.execute("Execute Script", {"script_name": name}).observation

    assert "refused 28" in run("deep.py")  # ENOSPC, 40 folders down
    run("clean.py")
    many = run("many.py")
    assert "refused after" in many and " 28" in many  # out of inodes
    run("clean.py")
    assert "sparse ok" in run("sparse.py")  # holes cost nothing; filling them would hit the limit
    assert "refused 28" in run("fill.py") and used_mb(env) <= 21


@needs_root
def test_an_ext4_workspace_holds_what_the_run_writes_on_disk_not_in_memory_and_gives_back_what_it_deletes(
    tmp_path, backend
):
    from runner.actions import Environment
    from runner.execution.sandboxes import get_sandbox
    from runner.workspace.mounts import image_path, remove_tree, support_paths, workspace_layout

    workspace = tmp_path / "run" / "workspace-1"
    box = get_sandbox(backend)
    workspace_layout(
        {}, workspace, BlobStore(tmp_path / "blobs"), read_only=set(), sandbox=box, filesystem="ext4",
        limit_mb=64, max_files=1000,
    )  # fmt: skip
    env = Environment(workspace=workspace, sandbox=box, python=box.python, workspace_limit_mb=64)
    image = image_path(workspace)
    try:
        mounts = {line.split()[1]: line.split()[2] for line in Path("/proc/mounts").read_text().splitlines()}
        assert mounts[str(support_paths(workspace)[1])] == "ext4"  # the upper layer is on the image, not a tmpfs
        empty = image.stat().st_blocks * 512
        assert empty < 4 << 20  # sparse: an empty 64 MB workspace costs little disk

        written = write_and_run(env, "fill.py", "open('data.bin', 'wb').write(b'x' * (40 << 20)); print('ok')")
        assert "ok" in written.observation
        os.sync()
        assert image.stat().st_blocks * 512 - empty >= 40 << 20  # on the disk of the runs folder
        write_and_run(env, "clean.py", "import os; os.remove('data.bin')")
        os.sync()
        subprocess.run(["fstrim", str(support_paths(workspace)[1])], check=False, capture_output=True)
        assert image.stat().st_blocks * 512 - empty < 8 << 20  # deleted: punched out of the image again
    finally:
        env.close()
        remove_tree(workspace)
    assert not image.exists() and not list((tmp_path / "run").iterdir())


def test_without_a_sized_filesystem_a_repl_writer_over_the_limit_is_stopped_after_the_action(make_env):
    env = make_env(workspace_limit_mb=5)  # a plain folder: what an unprivileged worker has
    command = (
        "import threading, time\n"
        "def fill():\n"
        "    with open('fill.bin', 'wb') as fh:\n"
        "        while True:\n"
        "            fh.write(b'x' * (1 << 20)); fh.flush(); time.sleep(0.05)\n"
        "threading.Thread(target=fill, daemon=True).start()"
    )
    env.execute("Python REPL", {"command": command})
    (env.workspace / "wait.py").write_text(
        "import os, time\nwhile os.path.getsize('fill.bin') < (8 << 20):\n    time.sleep(0.05)\n"
    )
    outcome = env.execute("Execute Script", {"script_name": "wait.py"})
    assert "over its limit of 5 MB" in outcome.observation and "The Python REPL was stopped" in outcome.observation
    size = (env.workspace / "fill.bin").stat().st_size
    time.sleep(1)
    assert (env.workspace / "fill.bin").stat().st_size == size  # nothing writes any more


# -- per-sandbox process limits --------------------------------------------------------------------------------


def spawn_beside_a_hog(hog: Environment, other: Environment, spawn: str) -> str:
    """The hog's REPL holds 60 processes; then the other sandbox runs ``spawn`` as a script: its observation."""
    try:
        held = hog.execute(
            "Python REPL",
            {"command": "import subprocess\nheld = [subprocess.Popen(['sleep', '600']) for _ in range(60)]\n"
             "print('holding', len(held))"},
        )  # fmt: skip
        assert "holding 60" in held.observation
        (other.workspace / "spawn.py").write_text(spawn)
        return other.execute("Execute Script", {"script_name": "spawn.py"}).observation
    finally:
        hog.close()
        other.close()


@bwrap
@pytest.mark.skipif(not __import__("runner.sandbox.cgroups").sandbox.cgroups.available(), reason="no cgroups here")
def test_processes_held_in_one_sandbox_do_not_count_against_another(tmp_path):
    from runner.actions import Environment
    from runner.execution.sandboxes import get_sandbox
    from runner.sandbox import Limits
    from runner.sandbox.identity import writable_for_sandbox

    def environment(name: str, processes: int) -> Environment:
        workspace = tmp_path / name
        workspace.mkdir()
        box = get_sandbox("bwrap")
        writable_for_sandbox(workspace, box.ids)
        return Environment(
            workspace=workspace, sandbox=box, python=box.python, limits=Limits(processes=processes), action_timeout_s=60
        )

    hog, other = environment("hog", 100), environment("other", 20)
    observation = spawn_beside_a_hog(
        hog,
        other,
        "import subprocess\nstarted = []\ntry:\n    for _ in range(15):\n"
        "        started.append(subprocess.Popen(['sleep', '30']))\n"
        "except OSError as exc:\n    print('refused', exc)\n"
        "print('started', len(started))\nfor p in started:\n    p.kill()\n",
    )
    assert "started 15" in observation, observation


def test_a_worker_removes_only_empty_groups_of_other_workers_and_kills_nothing_in_them(tmp_path, monkeypatch):
    from runner.sandbox import cgroups

    shared = tmp_path / "mlab-bench"
    live = shared / "w-otherlive" / "s0"
    dead = shared / "w-otherdead" / "s3"
    mine = shared / cgroups.WORKER / "s1"
    for group in (live, dead, mine):
        group.mkdir(parents=True)
        (group / "cgroup.procs").write_text("")
    for parent in (shared / "w-otherlive", shared / "w-otherdead", shared / cgroups.WORKER):
        (parent / "cgroup.procs").write_text("")
    (live / "cgroup.procs").write_text("4242\n")  # a process in another PID namespace, alive for its worker
    killed = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: killed.append(pid))
    monkeypatch.setattr(Path, "rmdir", lambda self: shutil.rmtree(self))  # cgroupfs rmdir of a group with files

    cgroups._remove_empty_others(shared)

    assert live.exists() and mine.exists() and not dead.parent.exists() and killed == []


@bwrap
@needs_root
def test_without_cgroups_runs_with_uids_of_their_own_do_not_starve_each_other(tmp_path, settings, monkeypatch):
    from runner.actions import Environment
    from runner.execution.sandboxes import get_sandbox
    from runner.sandbox import Limits
    from runner.sandbox.cgroups import Cgroup
    from runner.sandbox.identity import writable_for_sandbox

    monkeypatch.setattr(Cgroup, "create", classmethod(lambda cls, **kwargs: None))  # a host without cgroups
    settings.BENCH_SANDBOX_UID_RANGE = "300000-300999"

    def environment(run_id: int, processes: int) -> Environment:
        workspace = tmp_path / str(run_id)
        workspace.mkdir()
        box = get_sandbox("bwrap", run_id=run_id)
        writable_for_sandbox(workspace, box.ids)
        limits = Limits(processes=processes)
        return Environment(workspace=workspace, sandbox=box, python=box.python, limits=limits, action_timeout_s=60)

    hog, other = environment(7, 100), environment(8, 20)
    assert hog.sandbox.ids == (300007, 300007) and other.sandbox.ids == (300008, 300008)
    observation = spawn_beside_a_hog(
        hog,
        other,
        "import os, subprocess\nstarted = [subprocess.Popen(['sleep', '30']) for _ in range(15)]\n"
        "print('uid', os.getuid(), 'started', len(started))\nfor p in started:\n    p.kill()\n",
    )
    assert "uid 300008 started 15" in observation, observation


@bwrap
@needs_root
@pytest.mark.django_db(transaction=True)
def test_a_runs_sandboxed_code_runs_as_the_runs_own_uid_from_the_range(tiny_task, settings):
    settings.BENCH_SANDBOX_UID_RANGE = "300000-300999"
    script = [
        {
            "type": "act",
            "action": "Write File",
            "input": {"file_name": "who.py", "content": "import os\nprint(os.getuid())"},
        },
        {"type": "act", "action": "Execute Script", "input": {"script_name": "who.py"}},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]
    run = run_execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)

    assert run.status == "finished", run.error
    assert str(300000 + run.pk % 1000) in Step.objects.get(run=run, index=1).observation


@needs_root
def test_a_root_worker_runs_each_runs_code_as_a_uid_of_its_own_unless_told_not_to(settings):
    """Per-run uids are the default where the host allows them (a root worker): two runs never share a user."""
    from runner.execution.sandboxes import get_sandbox

    def configured(**env: str) -> str:
        environ = {k: v for k, v in os.environ.items() if k != "BENCH_SANDBOX_UID_RANGE"} | env
        code = "import bench.settings as s; print(repr(s.BENCH_SANDBOX_UID_RANGE))"
        done = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    assert configured() == "'200000-299999'"
    assert configured(BENCH_SANDBOX_UID_RANGE="off") == "''"
    settings.BENCH_SANDBOX_UID_RANGE = "200000-299999"
    first, second = (get_sandbox("bwrap", run_id=run_id).ids for run_id in (41, 42))
    assert first == (200041, 200041) and second == (200042, 200042)
