"""Regression tests for what a security review found: each one reproduces the attack and checks it fails."""

import os
import stat
import time

import pytest

from runner.execution import run_execute
from runner.models import Run, RunLimits, Step
from runner.sandbox import Limits
from runner.sandboxes import sandbox_config
from runner.services import run_create

from ..factories import AgentFactory

as_root = pytest.mark.skipif(sandbox_config().ids is None, reason="the worker is not root here")


def run_script(env, source: str, name: str = "attempt.py"):
    (env.workspace / name).write_text(source)
    os.chown(env.workspace / name, *(sandbox_config().ids or (os.getuid(), os.getgid())))
    return env.execute("Execute Script", {"script_name": name})


@as_root
def test_sandboxed_code_is_an_unprivileged_user_without_capabilities(make_env):
    outcome = run_script(
        make_env(),
        """
import ctypes, os
print("uid", os.getuid(), "caps", open("/proc/self/status").read().split("CapEff:")[1].split()[0])
for path in ["/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger"]:
    try:
        open(path, "w"); print("WROTE", path)
    except OSError as exc:
        print("blocked", path)
print("remount", ctypes.CDLL(None, use_errno=True).mount(b"none", b"/usr", None, 32 | 4096 | 1, None))
""",
    )
    assert "uid 65534 caps 0000000000000000" in outcome.observation
    assert "WROTE" not in outcome.observation
    assert "remount -1" in outcome.observation


def test_a_backup_link_planted_by_a_script_does_not_reach_outside(make_env, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "answer_key.csv").write_text("TOP SECRET")
    env = make_env()
    run_script(env, f"import os\nos.symlink({str(outside)!r}, 'backup')")
    assert (env.workspace / "backup").is_symlink()

    first = env.execute("Write File", {"file_name": "answer", "content": "x"})
    second = env.execute("Write File", {"file_name": "answer", "content": "y"})
    undo = env.execute("Undo Edit Script", {"script_name": "answer"})

    assert "TOP SECRET" not in first.observation + second.observation + undo.observation
    assert (outside / "answer_key.csv").read_text() == "TOP SECRET"
    assert sorted(p.name for p in outside.iterdir()) == ["answer_key.csv"]


def test_copy_file_onto_a_folder_holding_a_read_only_file_is_refused(make_env):
    env = make_env({"data/train.csv": "original", "train.csv": "poison"}, read_only_files=["data/train.csv"])
    outcome = env.execute("Copy File", {"source": "train.csv", "destination": "data"})
    assert outcome.error and "destination is a folder" in outcome.observation
    assert (env.workspace / "data" / "train.csv").read_text() == "original"


@as_root
def test_renaming_the_folder_of_a_read_only_blob_does_not_make_it_writable(make_env, tmp_path):
    blob = tmp_path / "blob"
    blob.write_text("shared task data")
    blob.chmod(0o444)
    env = make_env()
    (env.workspace / "data").mkdir()
    os.link(blob, env.workspace / "data" / "train.csv")
    from runner.sandbox.identity import writable_for_sandbox

    writable_for_sandbox(env.workspace, env.sandbox.ids, read_only={"data/train.csv"})
    env.read_only_files = ["data/train.csv"]
    outcome = run_script(
        env,
        """
import os
for attempt in ("rename", "chmod", "append", "unlink"):
    try:
        if attempt == "rename":
            os.rename("data", "data2")
        elif attempt == "chmod":
            os.chmod("data/train.csv", 0o666)
        elif attempt == "append":
            open("data/train.csv", "a").write("POISON")
        else:
            os.unlink("data/train.csv")
        print("DID", attempt)
    except OSError as exc:
        print("blocked", attempt)
""",
    )
    assert "DID" not in outcome.observation, outcome.observation
    assert blob.read_text() == "shared task data" and stat.S_IMODE(blob.stat().st_mode) == 0o444


def test_write_file_onto_a_fifo_is_refused_at_once(make_env):
    env = make_env()
    run_script(env, "import os\nos.mkfifo('pipe')")
    started = time.monotonic()
    outcome = env.execute("Write File", {"file_name": "pipe", "content": "x"})
    copied = env.execute("Copy File", {"source": "pipe", "destination": "copy"})
    assert time.monotonic() - started < 5
    assert outcome.error and "special file" in outcome.observation
    assert copied.error


def test_bad_names_and_contents_are_observations_not_crashes(make_env):
    env = make_env()
    for args in (
        {"file_name": "a\ud800b", "content": "x"},
        {"file_name": "a\0b", "content": "x"},
        {"file_name": "x" * 300, "content": "x"},
        {"file_name": "ok.txt", "content": "bad \ud800 surrogate"},
    ):
        outcome = env.execute("Write File", args)
        assert outcome.error and outcome.observation.startswith("EnvError"), args


def test_a_swapped_link_never_lets_read_file_reach_outside(make_env, tmp_path):
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "f").write_text("HOST SECRET")
    env = make_env({"d/f": "inside"})
    try:
        env.execute(
            "Python REPL",
            {
                "command": f"""import os, threading
def swap():
    while True:
        try:
            os.rename("d", "d_real"); os.symlink({str(outside)!r}, "d"); os.unlink("d"); os.rename("d_real", "d")
        except OSError:
            pass
threading.Thread(target=swap, daemon=True).start()"""
            },
        )
        seen = [env.execute("Read File", {"file_name": "d/f"}).observation for _ in range(200)]
        snapshots = [env.workspace_size_mb() for _ in range(20)]
    finally:
        env.close()
    assert not any("HOST SECRET" in s for s in seen)
    assert any(s == "inside" for s in seen)
    assert all(size < 1 for size in snapshots)


def test_the_repl_survives_garbage_on_its_channel_and_a_large_command(make_env):
    env = make_env(action_timeout_s=20)
    try:
        garbled = env.execute("Python REPL", {"command": "import os; os.write(3, b'not json\\n')"})
        assert garbled.error and "garbled" in garbled.observation
        big = env.execute("Python REPL", {"command": "x = '" + "a" * 200_000 + "'; print(len(x))"})
        assert big.observation == "200000\n"
    finally:
        env.close()


def test_the_repl_is_held_to_the_workspace_limit(make_env):
    env = make_env(workspace_limit_mb=5, action_timeout_s=60)
    try:
        outcome = env.execute(
            "Python REPL",
            {
                "command": "import time\nfor i in range(100):\n"
                "    open(f'f{i}', 'wb').write(b'x' * 2**20)\n    time.sleep(0.05)"
            },
        )
    finally:
        env.close()
    assert outcome.error and "over its limit of 5 MB" in outcome.observation


def test_deep_nesting_does_not_break_snapshots_or_cleanup(make_env):
    from runner.snapshots import BlobStore, Snapshotter, remove_tree

    env = make_env(limits=Limits(file_size_mb=10))
    run_script(
        env,
        "import os\nopen('top.txt', 'w').write('y')\nfor i in range(1200):\n    os.mkdir('d')\n    os.chdir('d')\n"
        "open('deep.txt', 'w').write('x')\nprint('nested')",
    )
    _, manifest = Snapshotter(env.workspace, BlobStore()).take()
    assert "top.txt" in manifest  # the deep file is beyond the depth snapshots follow
    remove_tree(env.workspace)
    assert not env.workspace.exists()


@pytest.mark.django_db(transaction=True)
def test_an_agent_that_never_reads_its_answers_cannot_hang_the_worker(tiny_task):
    read = {"type": "act", "action": "Read File", "input": {"file_name": "train.py"}}
    agent = AgentFactory(config={"script": [{"flood": 3000, "message": read}]})
    run = run_create(task=tiny_task.task, agent=agent, enqueue=False, limits=RunLimits(max_time_s=8))
    started = time.monotonic()
    run = run_execute(run.pk)
    assert time.monotonic() - started < 60
    assert run.status in ("timed_out", "failed"), run.error


@pytest.mark.django_db(transaction=True)
def test_nul_bytes_from_scripts_and_agents_are_recorded(tiny_task):
    script = [
        {
            "type": "act",
            "action": "Write File",
            "input": {"file_name": "nul.py", "content": "print('a' + chr(0) + 'b')"},
        },
        {
            "type": "act",
            "action": "Execute Script",
            "input": {"script_name": "nul.py"},
            "entries": {"Thought": "x<NUL>y"},
        },
        {"exit": 0, "stderr": "agent log with a <NUL> NUL"},
    ]
    run = run_execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)
    assert run.status == "failed" and run.failure_kind == "agent"  # it exited without a Final Answer, recorded
    step = Step.objects.get(run=run, action="Execute Script")
    assert "a\ufffdb" in step.observation and step.entries["Thought"] == "x\ufffdy"
    assert "NUL" in run.stderr_tail


@pytest.mark.django_db(transaction=True)
def test_an_agent_may_not_pick_another_configured_model(tiny_task, endpoint, llm_server):
    from runner.models import ModelEndpoint

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
    assert "this run may use the model 'test-model'" in run.stderr_tail
    assert "max_tokens must be a whole number" in run.stderr_tail
    assert llm_server.requests == [] and Run.objects.get(pk=run.pk).tokens_in == 0
