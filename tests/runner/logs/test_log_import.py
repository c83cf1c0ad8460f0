"""Runs made elsewhere: an MLAgentBench log imported as a self-reported run, exported back in MLAgentBench's
layout, and every bad upload refused with one message and nothing left behind."""

from __future__ import annotations

import html
import json
import re
import stat
import zipfile
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from runner.execution import run_execute
from runner.logs.exports import EXTRAS, EXTRAS_FORMAT, log_export
from runner.logs.imports import LogImportError, log_import
from runner.models import Agent, Run, Step
from runner.services import run_create
from runner.workspace.snapshots import BlobStore
from tests.factories import AgentFactory, RunFactory

T0 = 1_700_000_000.0
PROBLEM = "Make value.txt hold a larger number than train.py writes."
TRAIN = 'print("training")\nwith open("value.txt", "w") as fh:\n    fh.write("2.0")\nprint("done")\n'


FINAL = {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}}


def step(name: str, args: object, observation: str, at: float) -> dict:
    return {"action": {"name": name, "args": args}, "observation": observation, "timestamp": T0 + at}


def trace() -> dict:
    """A trace as MLAgentBench's Environment writes it: three steps, the second with two low-level steps."""
    return {
        "steps": [
            step("List Files", {"dir_path": "."}, "backup/\ndata.txt\ntrain.py\n", 1),
            step(
                "Edit Script (AI)",
                {"script_name": "train.py", "edit_instruction": "write 7", "save_name": "train.py"},
                "The edited file is saved to train.py.",
                10,
            ),
            step("Final Answer", {"final_answer": "value.txt now holds 7"}, "end", 12),
        ],
        "low_level_steps": [
            step("Read File", {"file_name": "train.py"}, TRAIN, 2),
            step("Write File", {"file_name": "train.py", "content": "..."}, "File train.py written successfully.", 9),
        ],
        "action_infos": {"List Files": {"name": "List Files", "description": "", "usage": {}, "return_value": ""}},
        "task_description": PROBLEM,
    }


def write_log(root: Path, *, trace_data: object = None, overall_time: str | None = "12.5") -> Path:
    """A log folder in MLAgentBench's layout: env_log/trace.json, env_log/traces/step_N_files/ (the workspace's
    files but the read-only ones), step_final_files/, overall_time.txt, and the agent's log."""
    env_log = root / "env_log"
    written = TRAIN.replace("2.0", "7")
    workspaces = {
        "step_0_files": {"train.py": TRAIN},
        "step_1_files": {"train.py": written, "data.txt": "rewritten, though read-only"},
        "step_2_files": {"train.py": written, "value.txt": "7"},
        "step_final_files": {"train.py": written, "value.txt": "7"},
    }
    for folder, files in workspaces.items():
        (env_log / "traces" / folder / "backup").mkdir(parents=True)
        for rel, text in files.items():
            (env_log / "traces" / folder / rel).write_text(text)
    text = json.dumps(trace() if trace_data is None else trace_data, indent=4)
    (env_log / "trace.json").write_text(text if not isinstance(trace_data, str) else trace_data)
    if overall_time is not None:
        (env_log / "overall_time.txt").write_text(overall_time)
    (root / "agent_log").mkdir()
    (root / "agent_log" / "main_log").write_text("Step 0\nThought: look first\n")
    return root


def zip_folder(folder: Path, out: Path) -> Path:
    with zipfile.ZipFile(out, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, f"{folder.name}/{path.relative_to(folder)}")
    return out


def blobs() -> set[str]:
    return {str(p) for p in Path(settings.BENCH_BLOB_DIR).rglob("*") if p.is_file()}


def manifest(sha: str) -> dict:
    return BlobStore().manifest_load(sha)


@pytest.mark.django_db(transaction=True)
def test_a_log_becomes_a_self_reported_run_with_its_steps_snapshots_and_score(tiny_task, tmp_path, capsys):
    tiny_task.baseline_score = 2.0
    tiny_task.save(update_fields=["baseline_score"])
    log = write_log(tmp_path / "logs" / "tiny" / "run-a")
    archive = zip_folder(log, tmp_path / "run-a.zip")

    call_command("import_log", str(archive), "--task", "tiny", "--agent", "their-agent", "--model", "gpt-x")

    run = Run.objects.get()
    assert "self-reported" in capsys.readouterr().out
    assert run.origin == Run.Origin.SELF_REPORTED and run.is_self_reported
    assert (run.agent.name, run.agent.kind, run.model) == ("their-agent", Agent.Kind.EXTERNAL, "gpt-x")
    assert (run.status, run.task_version, run.steps_count, run.wall_seconds) == ("finished", tiny_task, 3, 12.5)
    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert [s.action for s in steps] == ["List Files", "Edit Script (AI)", "Final Answer"]
    assert steps[1].action_input["edit_instruction"] == "write 7"
    assert steps[0].observation == "backup/\ndata.txt\ntrain.py\n"
    # Each step ends when MLAgentBench dated it, and starts when the step before it ended.
    assert [s.started_at.timestamp() + s.duration_s for s in steps] == [T0 + 1, T0 + 10, T0 + 12]
    assert steps[2].started_at.timestamp() == T0 + 10
    # The low-level steps belong to the step they were taken in.
    assert steps[0].low_level == [] and steps[2].low_level == []
    assert [low["action"] for low in steps[1].low_level] == ["Read File", "Write File"]
    assert steps[1].low_level[0]["input"] == {"file_name": "train.py"}

    # The workspace after each step: its files over the task's read-only ones, each content stored once.
    after = [manifest(s.snapshot) for s in steps]
    assert sorted(after[0]) == ["data.txt", "train.py"]
    assert sorted(after[2]) == ["data.txt", "train.py", "value.txt"]
    # The task's own read-only file, whatever the log holds under its name.
    assert after[0]["data.txt"] == after[1]["data.txt"] == manifest(run.initial_snapshot)["data.txt"]
    assert after[1]["train.py"] == after[2]["train.py"] != after[0]["train.py"]
    assert BlobStore().read_bytes(after[2]["value.txt"][0]) == b"7"
    assert run.final_snapshot == steps[2].snapshot  # step_final_files holds the same workspace

    # Scored here, in the sandbox, with the task's eval on the final files.
    assert run.final_score == 7.0
    assert run.improvement == pytest.approx(2.5) and run.succeeded is True
    assert run.final_answer == "value.txt now holds 7"


@pytest.mark.django_db(transaction=True)
def test_the_task_is_found_by_its_research_problem_and_an_unended_log_is_left_out_like_mlagentbench(
    tiny_task, tmp_path, settings
):
    settings.BENCH_RUNS_DIR = str(tmp_path / "no-run-has-run-here")
    log = write_log(tmp_path / "logs" / "tiny" / "run-b", overall_time=None)  # MLAgentBench's logs/<task>/<run>/
    (log / "env_log" / "error.txt").write_text("Traceback ...\nConnectionError: aborted\n")
    data = trace()
    data["steps"][0]["observation"] = "EnvError: cannot list files in nowhere"
    (log / "env_log" / "trace.json").write_text(json.dumps(data))

    run = log_import(source=zip_folder(tmp_path / "logs", tmp_path / "logs.zip"))

    assert run.task == tiny_task.task and run.agent.name == "mlagentbench-log"
    assert (run.status, run.failure_kind) == (Run.Status.FAILED, Run.FailureKind.INFRASTRUCTURE)
    assert "ConnectionError: aborted" in run.error
    assert run.final_score == 7.0  # scored though no run had made the runs folder yet
    assert list(run.steps.order_by("index").values_list("is_error", flat=True)) == [True, False, False]


@pytest.mark.django_db(transaction=True)
def test_self_reported_runs_are_ranked_only_when_asked_and_marked_where_runs_are_shown(tiny_task, tmp_path, client):
    executed = run_create(
        task=tiny_task.task, agent=AgentFactory(name="ours", config={"script": [FINAL]}), enqueue=False
    )
    run_execute(executed.pk)
    imported = log_import(source=write_log(tmp_path / "run-c"), task_slug="tiny", agent_name="theirs")

    def agents(query: str) -> list[str]:
        response = client.get(reverse("leaderboard:leaderboard") + f"?format=json{query}")
        assert response.status_code == 200
        return sorted(row["agent"] for row in response.json()["rows"])

    assert agents("") == ["ours"]
    assert agents("&origin=verified") == ["ours"]
    assert agents("&origin=all") == ["ours", "theirs"]
    assert client.get(reverse("leaderboard:leaderboard") + "?origin=mine").status_code == 200  # named, left out
    assert "Unknown origin" in client.get(reverse("leaderboard:leaderboard") + "?origin=mine").content.decode()
    assert client.get("/api/v1/leaderboard/?origin=mine").status_code == 400

    # The board's counts link to the runs behind them: verified ones, or self-reported ones too with ?origin=all.
    board = client.get(reverse("leaderboard:leaderboard") + "?origin=all").content.decode()
    links = [html.unescape(h) for h in re.findall(r'href="(/runs/\?[^"]*agent=theirs[^"]*)"', board)]
    assert links and all("origin=verified" not in link for link in links)
    assert f'href="/runs/{imported.pk}/"' in client.get(links[0]).content.decode()
    board = client.get(reverse("leaderboard:leaderboard")).content.decode()
    links = [html.unescape(h) for h in re.findall(r'href="(/runs/\?[^"]*agent=ours[^"]*)"', board)]
    assert links and all("origin=verified" in link for link in links)
    verified = client.get(reverse("runner:run_list") + "?origin=verified").content.decode()
    assert f'href="/runs/{imported.pk}/"' not in verified and f'href="/runs/{executed.pk}/"' in verified
    assert "Unknown origin" in client.get(reverse("runner:run_list") + "?origin=mine").content.decode()

    page = client.get(reverse("runner:run_detail", args=[imported.pk])).content.decode()
    assert "self-reported" in page
    assert "verified" in client.get(reverse("runner:run_detail", args=[executed.pk])).content.decode()
    listing = client.get(reverse("runner:run_list")).content.decode()
    assert listing.count('class="badge self-reported"') == 1 and 'class="badge verified"' in listing


@pytest.mark.django_db(transaction=True)
def test_an_external_agent_cannot_be_run(tiny_task, tmp_path):
    from runner.services import RunRequestError

    run = log_import(source=write_log(tmp_path / "run-d"), task_slug="tiny", agent_name="theirs")
    with pytest.raises(RunRequestError, match="no code here"):
        run_create(task=tiny_task.task, agent=run.agent, enqueue=False)


def _same_steps(a: Run, b: Run) -> None:
    fields = ("index", "action", "action_input", "entries", "observation", "snapshot", "low_level", "is_error")
    left = list(Step.objects.filter(run=a).order_by("index").values(*fields))
    right = list(Step.objects.filter(run=b).order_by("index").values(*fields))
    assert left and left == right
    ends = [
        [s.started_at.timestamp() + s.duration_s for s in Step.objects.filter(run=r).order_by("index")] for r in (a, b)
    ]
    assert ends[0] == pytest.approx(ends[1], abs=1e-3)


@pytest.mark.django_db(transaction=True)
def test_an_executed_run_exported_and_imported_again_has_the_same_steps_and_snapshots(tiny_task, tmp_path):
    script = [
        {"type": "act", "action": "Write File", "input": {"file_name": "value.txt", "content": "5"}},
        {"type": "act", "action": "List Files", "input": {"dir_path": "."}},
        {"type": "act", "action": "Execute Script", "input": {"script_name": "train.py"}},
        {"type": "act", "action": "Write File", "input": {"file_name": "notes/plan.md", "content": "more"}},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]
    agent = AgentFactory(name="scripted", config={"script": script})
    run = run_execute(run_create(task=tiny_task.task, agent=agent, enqueue=False).pk)
    out = tmp_path / "run.zip"

    call_command("export_log", str(run.pk), str(out))

    with zipfile.ZipFile(out) as archive:
        names = set(archive.namelist())
        top = f"run-{run.pk}"
        data = json.loads(archive.read(f"{top}/env_log/trace.json"))
        extras = json.loads(archive.read(f"{top}/mlab_bench.json"))
    # MLAgentBench's layout, which its eval.py reads (it opens ../log and ../agent_log/main_log too).
    assert {f"{top}/env_log/overall_time.txt", f"{top}/log", f"{top}/agent_log/main_log"} <= names
    assert f"{top}/env_log/traces/step_0_files/value.txt" in names
    assert f"{top}/env_log/traces/step_3_files/notes/plan.md" in names
    assert f"{top}/env_log/traces/step_final_files/train.py" in names
    assert not any(n.endswith("/data.txt") for n in names)  # read-only: MLAgentBench does not copy it
    assert set(data) == {"steps", "low_level_steps", "action_infos", "task_description"}
    assert {"action", "observation", "timestamp"} <= set(data["steps"][0])
    assert data["action_infos"]["Execute Script"]["name"] == "Execute Script"
    assert (extras["agent"], extras["status"], extras["final_score"]) == ("scripted", "finished", 2.0)

    again = log_import(source=out)

    assert again.origin == Run.Origin.SELF_REPORTED and again.task_version == run.task_version
    assert (again.agent, again.status, again.final_score) == (run.agent, run.status, run.final_score)
    assert again.final_answer == run.final_answer == "done"
    _same_steps(run, again)
    assert (again.initial_snapshot, again.final_snapshot) == (run.initial_snapshot, run.final_snapshot)
    assert again.wall_seconds == pytest.approx(run.wall_seconds)


@pytest.mark.django_db(transaction=True)
def test_an_imported_log_exported_and_imported_again_keeps_its_low_level_steps(tiny_task, tmp_path, client):
    first = log_import(source=write_log(tmp_path / "run-e"), task_slug="tiny", agent_name="theirs")
    response = client.get(reverse("runner:run_log_zip", args=[first.pk]))
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    out = tmp_path / "download.zip"
    out.write_bytes(b"".join(response.streaming_content))

    second = log_import(source=out)

    _same_steps(first, second)
    assert second.agent == first.agent and second.final_snapshot == first.final_snapshot
    assert [low["timestamp"] for low in Step.objects.get(run=second, index=1).low_level] == [T0 + 2, T0 + 9]


# -- bad uploads -----------------------------------------------------------------------------------------------------


def _zip(out: Path, members: dict[str, bytes], *, links: tuple[str, ...] = ()) -> Path:
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = ((stat.S_IFLNK | 0o777) if name in links else (stat.S_IFREG | 0o644)) << 16
            archive.writestr(info, data)
    return out


def _trace_bytes(data: object = None) -> bytes:
    return json.dumps(trace() if data is None else data).encode()


def _out_of_order() -> dict:
    data = trace()
    data["steps"][1]["timestamp"] = T0 + 20
    return data


def _trace_where(change) -> dict:
    data = trace()
    change(data)
    return data


def _with_record(**record) -> Path:
    """A log with a run record (``mlab_bench.json``) saying ``record``, and a final workspace that must not be stored
    when the record is refused."""

    def make(p: Path) -> Path:
        members = {
            "log/env_log/trace.json": _trace_bytes(),
            "log/env_log/traces/step_final_files/marker.txt": f"kept? {sorted(record)}".encode(),
            f"log/{EXTRAS}": json.dumps({"format": EXTRAS_FORMAT, **record}).encode(),
        }
        return _zip(p / "record.zip", members)

    return make


BAD_UPLOADS = {
    "not a zip": (lambda p: (p / "log.zip").write_bytes(b"not a zip at all") and p / "log.zip", "not a zip file"),
    "zip bomb": (
        lambda p: _zip(p / "bomb.zip", {"log/env_log/trace.json": _trace_bytes(), "log/big.bin": bytes(3_000_000)}),
        "unpacks to .* bytes; at most",
    ),
    "path traversal": (
        lambda p: _zip(p / "up.zip", {"log/env_log/trace.json": _trace_bytes(), "../evil.txt": b"x"}),
        "'..'",
    ),
    "symlink member": (
        lambda p: _zip(
            p / "link.zip", {"log/env_log/trace.json": _trace_bytes(), "log/x": b"/etc/passwd"}, links=("log/x",)
        ),
        "symbolic link",
    ),
    "missing trace.json": (
        lambda p: _zip(p / "none.zip", {"log/env_log/traces/step_0_files/train.py": b"x"}),
        "no trace.json found",
    ),
    "trace.json that does not parse": (
        lambda p: _zip(p / "broken.zip", {"log/env_log/trace.json": b'{"steps": [}'}),
        "trace.json does not parse as JSON",
    ),
    "trace.json without steps": (
        lambda p: _zip(p / "nosteps.zip", {"log/env_log/trace.json": b'{"history": []}'}),
        "no list of steps",
    ),
    "steps out of order": (
        lambda p: _zip(p / "order.zip", {"log/env_log/trace.json": _trace_bytes(_out_of_order())}),
        "step 2 is dated before step 1 .*out of order",
    ),
    "a step folder of no step": (
        lambda p: _zip(
            p / "extra.zip",
            {"log/env_log/trace.json": _trace_bytes(), "log/env_log/traces/step_7_files/train.py": b"x"},
        ),
        "step_7_files belongs to no step",
    ),
    "overall_time.txt without a number": (
        lambda p: _zip(
            p / "time.zip", {"log/env_log/trace.json": _trace_bytes(), "log/env_log/overall_time.txt": b"soon"}
        ),
        "overall_time.txt does not hold a number",
    ),
    "a timestamp past the year 9999": (
        lambda p: _zip(
            p / "late.zip",
            {"log/env_log/trace.json": _trace_bytes(_trace_where(lambda t: t["steps"][-1].update(timestamp=1e300)))},
        ),
        "step 2's timestamp is '1e\\+300'; expected a number from 0 to",
    ),
    "an overall time past any date": (
        lambda p: _zip(
            p / "long.zip", {"log/env_log/trace.json": _trace_bytes(), "log/env_log/overall_time.txt": b"1e300"}
        ),
        "overall_time.txt does not hold a number of seconds",
    ),
    "a trace.json nested too deeply": (
        lambda p: _zip(
            p / "deep.zip", {"log/env_log/trace.json": b'{"steps": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"}
        ),
        "trace.json nests lists or objects too deeply",
    ),
    "a trace.json too large to read": (
        lambda p: _zip(
            p / "large.zip",
            {
                "log/env_log/trace.json": _trace_bytes(
                    _trace_where(lambda t: t["steps"][0].update(observation="x" * 200_000))
                )
            },
        ),
        "trace.json is .* bytes; at most 100000 bytes are read",
    ),
    "a run record whose step index is not a number": (_with_record(steps=[{"index": [1]}]), r"steps\[0\]\.index"),
    "a run record with a negative cost": (_with_record(usage={"cost": -999}), "usage.cost is '-999'; expected"),
    "a run record with more tokens than a field holds": (
        _with_record(usage={"tokens_in": 1e30}),
        "usage.tokens_in is '1e\\+30'",
    ),
    "a task not in the bank": (
        lambda p: _zip(p / "task.zip", {"log/env_log/trace.json": _trace_bytes()}),
        "no task 'nope' in the bank",
    ),
    "a zip that unpacks to far more than its size": (
        lambda p: _zip(
            p / "ratio.zip",
            {"log/env_log/trace.json": _trace_bytes(), "log/env_log/traces/step_0_files/zeros": bytes(900_000)},
        ),
        "at most 100 times its size is allowed \\(BENCH_UPLOAD_MAX_RATIO\\)",
    ),
    "more files than a log may hold": (
        lambda p: _zip(
            p / "many.zip",
            {"log/env_log/trace.json": _trace_bytes()}
            | {f"log/env_log/traces/step_0_files/f{n}.txt": b"x" for n in range(60)},
        ),
        "the zip holds 61 files; at most 50 are allowed \\(BENCH_TRACE_MAX_FILES\\)",
    ),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", list(BAD_UPLOADS))
def test_a_bad_upload_gets_one_clear_error_and_leaves_nothing(case, tiny_task, tmp_path, settings):
    settings.BENCH_TASK_MAX_BYTES = 1_000_000
    settings.BENCH_TRACE_JSON_MAX_BYTES = 100_000
    settings.BENCH_UPLOAD_RATIO_FLOOR_BYTES = 300_000
    settings.BENCH_TRACE_MAX_FILES = 50
    make, message = BAD_UPLOADS[case]
    source = make(tmp_path)
    task = "nope" if case == "a task not in the bank" else "tiny"
    before, agents = blobs(), Agent.objects.count()

    with pytest.raises(CommandError, match=message) as caught:
        call_command("import_log", str(source), "--task", task, "--agent", "theirs")

    assert len(str(caught.value).splitlines()) == 1
    assert not Run.objects.exists() and not Step.objects.exists()
    assert Agent.objects.count() == agents and blobs() == before
    assert not (tmp_path.parent / "evil.txt").exists()


@pytest.mark.django_db
def test_a_log_import_error_is_typed_for_callers(tmp_path):
    with pytest.raises(LogImportError, match="does not exist"):
        log_import(source=tmp_path / "missing.zip")


@pytest.mark.parametrize(
    ("ended", "error_file"),
    [
        ({"status": "finished"}, False),
        ({"status": "failed", "failure_kind": "limit", "error": "reached the step limit of 50 steps"}, False),
        ({"status": "timed_out", "failure_kind": "limit", "error": "reached the time limit of 9 s while a script ran"},
         False),
        ({"status": "timed_out", "failure_kind": "limit", "error": "reached the time limit of 9 s"}, True),
        ({"status": "failed", "failure_kind": "limit", "error": "the run's token budget of 100 would be exceeded"},
         True),
        ({"status": "failed", "failure_kind": "agent", "error": "the agent process exited (code 1)"}, True),
    ],
)  # fmt: skip
def test_an_export_writes_error_txt_only_where_mlagentbench_writes_one(tiny_task, tmp_path, ended, error_file):
    run = RunFactory(task_version=tiny_task, final_snapshot=_snapshot(tiny_task), **ended)
    log_export(run=run, out=tmp_path / "run.zip")
    with zipfile.ZipFile(tmp_path / "run.zip") as archive:
        names = set(archive.namelist())
    assert f"run-{run.pk}/env_log/overall_time.txt" in names
    assert (f"run-{run.pk}/env_log/error.txt" in names) is error_file
    # MLAgentBench's runner saves no final files after an error: plot.py then has no final score for it.
    assert any(name.startswith(f"run-{run.pk}/env_log/traces/step_final_files/") for name in names) is not error_file


def test_a_log_denser_than_any_log_is_refused_before_python_builds_it():
    """64 MB of "[]," took 1.7 GB and 15 s to refuse; now it is counted, outside its strings, first."""
    from runner.logs.read import _json_parse

    attacks = ("[" + "[]," * 700_000 + "[]]", "[" + '{"a":1},' * 300_000 + "{}]", "[" + "0.5," * 600_000 + "1]")
    for dense in attacks:
        with pytest.raises(LogImportError, match="more than a log holds"):
            _json_parse(dense, "attack.json")
    text = 'said "' + "[{, \\" * 5000  # strings full of brackets, commas, quotes and backslashes are text
    sparse = json.dumps({"samples": [{"content": text, "n": i} for i in range(60)]})
    assert len(sparse) > 1 << 20 and len(_json_parse(sparse, "log.json")["samples"]) == 60


def _snapshot(version) -> str:
    """A final workspace of one file, value.txt, stored as a snapshot."""
    store = BlobStore()
    data = b"2"
    return store.manifest_save({"value.txt": [store.put_bytes(data), len(data)]})
