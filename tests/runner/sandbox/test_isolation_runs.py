"""Isolation seen from inside real runs. A scripted agent runs through ``run_execute`` on a task package whose data
lives outside /tmp (a sandbox's private /tmp would hide it anyway). Its script, run with Execute Script, searches
every folder the sandbox shows for the content of the task's hidden files and for secrets planted in the
checkout, the var folder, the home folder and elsewhere on the host; tries every way to overwrite the task's
read-only file; and lists the sandbox's top-level folders against an allow-list. The agent's own process runs
the same search in its sandbox."""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from runner.execution import run_execute
from runner.execution.sandboxes import get_sandbox
from runner.models import Run, Step
from runner.services import run_create
from runner.workspace.snapshots import BlobStore
from task_bank.services import task_import
from tests.factories import TINY_FILES, AgentFactory, package_write

# What a bwrap sandbox may show of the host: the read-only system (written out here, not imported: a test that
# read the product's list would follow it wherever a change took it).
SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc"]
DATA = "shared data\n"  # what TINY_FILES' prepare.py writes to the read-only data.txt

# The search, run inside a sandbox. Needles and secret names are given reversed, so that the script itself (and
# the agent's configuration) never holds what it looks for.
SEARCH = r"""
import json, os, sys
needles = [n[::-1].encode() for n in NEEDLES]
system = [d for d in SYSTEM if d != "/etc"]  # /etc is small: read it too
system += [p for p in {sys.prefix, sys.base_prefix} if p not in ("/", "/usr")]
found, files = [], 0
for top in sorted(os.listdir("/")):
    if top in ("proc", "sys", "dev"):
        continue
    for folder, subfolders, names in os.walk("/" + top):
        if any(folder == s or folder.startswith(s + "/") for s in system):
            subfolders[:] = []  # the read-only system and interpreter, bound from the host as they are
            continue
        for name in names:
            path = os.path.join(folder, name)
            try:
                if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) > (1 << 20):
                    continue
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            files += 1
            if any(n in data or n in name.encode() for n in needles):
                found.append(path)
print("SEARCH " + json.dumps({"found": found, "files": files, "top": sorted(os.listdir("/"))}), file=OUT, flush=True)
"""

OVERWRITE = r"""
import os
attempts = {
    "open for writing": lambda p: open(p, "w").write("overwritten"),
    "open to append": lambda p: open(p, "a").write("overwritten"),
    "change its mode": lambda p: os.chmod(p, 0o666),
    "remove it": lambda p: os.unlink(p),
    "rename it away": lambda p: os.rename(p, p + ".moved"),
    "replace it by rename": lambda p: (open("other.txt", "w").write("overwritten"), os.replace("other.txt", p)),
    "truncate it": lambda p: os.truncate(p, 0),
}
for rel in READ_ONLY:
    for what, attempt in attempts.items():
        try:
            attempt(rel)
            print("OVERWROTE", rel, what)
        except OSError as exc:
            print("refused", rel, what, type(exc).__name__)
print("CONTENT", repr(open(READ_ONLY[0]).read()))
# Whatever owns the file, the sandbox binds it read-only (the one protection when the worker is not root).
with open("/proc/self/mountinfo") as fh:
    mounts = [line.split() for line in fh]
for rel in READ_ONLY:
    options = [m[5].split(",") for m in mounts if m[4] == os.path.join(os.getcwd(), rel)]
    print("MOUNTED", rel, "read-only" if options and "ro" in options[-1] else "writable")
"""


@pytest.fixture
def outside(settings, bench_dirs):
    """The platform's data folder outside /tmp, in the checkout's var folder as a deployment has it, and
    secrets planted around the host (the checkout, the var folder, the home folder, /srv, /var, /tmp)."""
    token = uuid.uuid4().hex
    data = Path(settings.VAR_DIR) / f"isolation-{token}"
    settings.BENCH_DATA_DIR = data
    settings.BENCH_RUNS_DIR = data / "runs"
    settings.BENCH_TASK_CACHE_DIR = data / "tasks"
    settings.MEDIA_ROOT = data / "media"
    settings.BENCH_BLOB_DIR = data / "media" / "blobs"
    (data / "runs").mkdir(parents=True)
    secrets = {}
    for where, folder in {
        "checkout": Path(settings.BASE_DIR),
        "var folder": Path(settings.VAR_DIR),
        "data folder": data,
        "home folder": Path.home(),
        "srv": Path("/srv"),
        "var": Path("/var/tmp"),
        "tmp": Path("/tmp"),
    }.items():
        secret = f"secret-{where.replace(' ', '-')}-{uuid.uuid4().hex}"
        path = folder / f".bench-isolation-{secret}"
        try:
            path.write_text(secret)
        except OSError:  # a worker that is not root cannot write to /srv: that folder goes unchecked
            continue
        secrets[where] = (path, secret)
    yield {"data": data, "secrets": secrets, "token": token}
    for path, _ in secrets.values():
        path.unlink(missing_ok=True)
    shutil.rmtree(data, ignore_errors=True)


def isolation_task(root: Path, hidden: str):
    """The tiny task with hidden content in its package's scripts folder and in what prepare.py makes there."""
    files = {
        **TINY_FILES,
        "scripts/solution.txt": f"the reference solution: {hidden}-package\n",
        "scripts/prepare.py": f"""
            with open("../env/data.txt", "w") as fh:
                fh.write({DATA!r})
            with open("answer.txt", "w") as fh:
                fh.write("{hidden}-prepared\\n")
        """,
    }
    version, _ = task_import(root=package_write(root, files), slug="isolated")
    return version


def search_script(needles: list[str]) -> str:
    """The search's source, looking for these needles (written into it reversed)."""
    return f"NEEDLES = {json.dumps([n[::-1] for n in needles])}\nSYSTEM = {json.dumps(SYSTEM_DIRS)}\n{SEARCH}"


def act(action: str, **args) -> dict:
    return {"type": "act", "action": action, "input": args}


@pytest.mark.django_db(transaction=True)
def test_a_run_sees_no_hidden_file_no_host_secret_and_cannot_change_read_only_data(backend, outside, settings):
    settings.BENCH_SANDBOX = backend
    hidden = f"HIDDEN-{outside['token']}"
    version = isolation_task(outside["data"] / "package-src", hidden)
    secrets = outside["secrets"]
    needles = [f"{hidden}-package", f"{hidden}-prepared"] + [secret for _, secret in secrets.values()]
    search = search_script(needles)
    script = [
        {"probe": "exec(" + repr(search.replace("file=OUT", "file=__import__('sys').stderr")) + ")"},
        act("Write File", file_name="search.py", content=search.replace("file=OUT", "file=__import__('sys').stdout")),
        act("Execute Script", script_name="search.py"),
        act("Write File", file_name="overwrite.py", content='READ_ONLY = ["data.txt"]\n' + OVERWRITE),
        act("Execute Script", script_name="overwrite.py"),
        act("Write File", file_name="data.txt", content="overwritten"),
        act("Write File", file_name="value.txt", content="2.0"),
        act("Final Answer", final_answer="done"),
    ]
    run = run_execute(run_create(task=version.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)

    version.refresh_from_db()
    assert version.status == "ready", version.validation_log
    prepared_answer = list(Path(settings.BENCH_TASK_CACHE_DIR).rglob("answer.txt"))
    assert prepared_answer and f"{hidden}-prepared" in prepared_answer[0].read_text()  # the hidden file exists
    steps = {s.index: s for s in Step.objects.filter(run=run)}
    assert run.status == Run.Status.FINISHED, (run.error, [s.observation[:300] for s in steps.values()])

    # The script's sandbox: nothing hidden, nothing of the host, only the expected top-level folders.
    seen = json.loads(steps[1].observation.split("SEARCH ", 1)[1].splitlines()[0])
    assert seen["found"] == [], f"a sandboxed script read {seen['found']}"
    assert seen["files"] > 0  # the search read files (the workspace's at least)
    if backend == "bwrap":
        python = get_sandbox(backend).python  # the interpreter's folders are bound where they are on the host
        interpreter = {Path(p).parts[1] for p in (sys.prefix, sys.base_prefix, python, os.path.realpath(python))}
        allowed = {Path(d).name for d in SYSTEM_DIRS} | {"proc", "dev", "sys", "tmp", "workspace"} | interpreter
        assert set(seen["top"]) <= allowed, f"unexpected folders at the sandbox's root: {set(seen['top']) - allowed}"

    # The agent's sandbox: the same search, as the agent process itself.
    agent_line = next(line for line in run.stderr_tail.splitlines() if "SEARCH " in line)
    agent_seen = json.loads(agent_line.split("SEARCH ", 1)[1])
    assert agent_seen["found"] == [], f"the agent's process read {agent_seen['found']}"
    if backend == "bwrap":
        assert "workspace" not in agent_seen["top"]
        assert set(agent_seen["top"]) <= allowed - {"workspace"} | {"opt"}

    # Read-only data: every attempt refused, the file unchanged in the workspace and in the final snapshot.
    tried = steps[3].observation
    assert "OVERWROTE" not in tried, tried
    assert tried.count("refused data.txt") == 7 and f"CONTENT {DATA!r}" in tried
    assert "MOUNTED data.txt read-only" in tried
    assert "read-only" in steps[4].observation  # the Write File action refused too
    store = BlobStore()
    final = store.manifest_load(run.final_snapshot)
    assert store.read_bytes(final["data.txt"][0]).decode() == DATA
    assert "data.txt.moved" not in final
    assert run.final_score == 2.0  # eval.py still scored the workspace: nothing of it was broken
