"""Answers an agent brings: an uploaded package that carries what a ready task is scored on (its hidden answers,
its test inputs, a copy of the data set it is split from) fails its smoke test naming the task, in whatever
encoding it carries them; a package that carries a few of the rows, or none, passes."""

import bz2
import gzip
import io
import json
import pickle
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from django.urls import reverse

from runner.agents.answers import answers_carried, carried_tasks, task_rows
from runner.agents.packages import agent_import
from runner.agents.smoke import agent_smoke_run
from runner.execution.preparation import task_version_prepare
from runner.models import Agent
from task_bank.services import task_import
from tests.factories import TINY_FILES, package_write, validate_now

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "example-agent"
pytestmark = pytest.mark.django_db(transaction=True)

# A task split from a "public" data set: 40 test rows of 5 measurements, the answers hidden beside eval.py.
LEAKY = {
    "scripts/prepare.py": """
        import numpy as np

        rng = np.random.default_rng(7)
        data = rng.normal(size=(120, 5)).round(4)
        labels = (data.sum(axis=1) > 0).astype(int)
        with open("../env/train.csv", "w") as fh:
            fh.write("a,b,c,d,e,label\\n")
            fh.writelines(",".join(map(str, row)) + f",{y}\\n" for row, y in zip(data[:80], labels[:80]))
        with open("../env/test.csv", "w") as fh:
            fh.write("id,a,b,c,d,e\\n")
            fh.writelines(f"{i}," + ",".join(map(str, row)) + "\\n" for i, row in enumerate(data[80:]))
        with open("answer.csv", "w") as fh:
            fh.write("id,label\\n")
            fh.writelines(f"{i},{y}\\n" for i, y in enumerate(labels[80:]))
        with open("../env/data.txt", "w") as fh:
            fh.write("shared data\\n")
    """,
}


def public_data() -> tuple[np.ndarray, np.ndarray]:
    """The whole public data set the task was split from, as an agent could bring it."""
    rng = np.random.default_rng(7)
    data = rng.normal(size=(120, 5)).round(4)
    return data, (data.sum(axis=1) > 0).astype(int)


def csv_text(data: np.ndarray, labels: np.ndarray, sep: str = ",") -> str:
    rows = [sep.join([*map(str, row), str(y)]) for row, y in zip(data, labels, strict=True)]
    return sep.join(["a", "b", "c", "d", "e", "label"]) + "\n" + "\n".join(rows) + "\n"


def npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def encodings() -> dict[str, bytes]:
    data, labels = public_data()
    text = csv_text(data, labels)
    npz = io.BytesIO()
    np.savez_compressed(npz, x=data, y=labels)
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data/all.csv", text)
    pairs = zip(data, labels, strict=True)
    records = [dict(zip("abcde", map(float, row), strict=True), label=int(y)) for row, y in pairs]
    order = [4, 2, 0, 3, 1]  # its columns in another order, between a row number and the label
    rows = enumerate(zip(data, labels, strict=True))
    reordered = "\n".join(",".join([str(n), *(str(row[i]) for i in order), str(y)]) for n, (row, y) in rows)
    return {
        "csv": text.encode(),
        "reordered.csv": reordered.encode(),
        "tsv.gz": gzip.compress(csv_text(data, labels, "\t").encode()),
        "json": json.dumps(records).encode(),
        "columns.json.bz2": bz2.compress(json.dumps({k: data[:, i].tolist() for i, k in enumerate("abcde")}).encode()),
        "npy": npy(data),
        "npz": npz.getvalue(),
        "pkl": pickle.dumps({"x": data.astype(np.float32), "y": labels}),
        "zip": zipped.getvalue(),
    }


@pytest.fixture
def leaky(tmp_path):
    version, _ = task_import(root=package_write(tmp_path / "leaky", dict(TINY_FILES, **LEAKY)), slug="leaky")
    validate_now(version)
    version.refresh_from_db()
    assert version.status == "ready", version.validation_log
    return version


def agent_with(tmp_path, name: str, data: bytes) -> Path:
    package = tmp_path / "agent"
    shutil.copytree(EXAMPLE, package, dirs_exist_ok=True)
    (package / "data").mkdir(exist_ok=True)
    (package / "data" / name).write_bytes(data)
    toml = package / "agent.toml"
    toml.write_text(toml.read_text().replace('version = "1"', f'version = "{name}"'))  # one version per package
    return package


def test_a_tasks_scored_rows_are_its_test_inputs_and_hidden_answers_without_identifiers(leaky):
    rows = task_rows(task_version_prepare(leaky).root)
    data, _ = public_data()
    assert rows == {tuple(f"{v:.6g}" for v in row) for row in data[80:]}  # the 40 test rows; answers are too short


@pytest.mark.parametrize("encoding", list(encodings()))
def test_a_package_carrying_the_public_data_set_carries_the_task_in_any_encoding(leaky, tmp_path, encoding):
    package = agent_with(tmp_path, f"public.{encoding}", encodings()[encoding])
    carried = answers_carried(package)
    assert [(c.slug, c.found) for c in carried] == [("leaky", 40)], carried


def test_a_package_with_a_few_of_the_rows_or_other_data_carries_nothing(leaky, tmp_path):
    data, labels = public_data()
    few = agent_with(tmp_path, "few.csv", csv_text(data[80:92], labels[80:92]).encode())  # 12 of the 40
    assert answers_carried(few) == []
    other = np.random.default_rng(8).normal(size=(120, 5)).round(4)
    assert answers_carried(agent_with(tmp_path, "other.npy", npy(other))) == []


def test_rows_count_wherever_the_values_lie_in_a_flattened_table(tmp_path):
    rows = {tuple(str(10 * i + j) for j in range(4)) for i in range(10)}
    (tmp_path / "flat.txt").write_text(" ".join(["x", *(v for row in sorted(rows) for v in (*row, "label"))]))
    assert carried_tasks(tmp_path, {"t": rows}) == []  # one column of space-separated values: not a table
    (tmp_path / "flat.txt").write_text(",".join(["x", *(v for row in sorted(rows) for v in (*row, "label"))]))
    assert [(c.slug, c.found) for c in carried_tasks(tmp_path, {"t": rows})] == [("t", 10)]


def test_an_upload_that_carries_a_tasks_answers_fails_its_smoke_test_naming_the_task(leaky, tmp_path):
    data, labels = public_data()
    package = agent_with(tmp_path, "digits.csv.gz", gzip.compress(csv_text(data, labels).encode()))
    agent, _ = agent_import(source=package, smoke_test=True)
    assert agent_smoke_run(agent.pk) == Agent.Smoke.FAILED
    agent.refresh_from_db()
    assert "the package carries what a ready task is scored on: leaky (40 of 40 of its scored rows)" in (
        agent.smoke_error
    )
    clean, _ = agent_import(source=agent_with(tmp_path / "clean", "notes.csv", b"a,b\n1,2\n"), smoke_test=True)
    assert agent_smoke_run(clean.pk) == Agent.Smoke.PASSED, Agent.objects.get(pk=clean.pk).smoke_error


def test_staff_see_the_packages_files_and_sizes_on_the_agents_page(tmp_path, client, admin_client):
    agent, _ = agent_import(source=agent_with(tmp_path, "big.csv", b"x" * 5000))
    staff = admin_client.get(reverse("runner:agent_detail", args=[agent.name])).content.decode()
    assert "<h2>Package files</h2>" in staff
    assert staff.index("<code>data/big.csv</code>") < staff.index("<code>example_agent.py</code>")  # largest first
    assert "4.9\xa0KB" in staff
    assert "Package files" not in client.get(reverse("runner:agent_detail", args=[agent.name])).content.decode()


def test_files_that_are_no_table_are_searched_as_bytes_and_never_break_the_scan(tmp_path):
    rows = {tuple(f"{v:.6g}" for v in row) for row in public_data()[0][80:]}
    (tmp_path / "huge-field.csv").write_text("a," + "x" * 300_000 + "\n")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "broken.gz").write_bytes(b"\x1f\x8bnot gzip")
    (tmp_path / "broken.npz").write_bytes(b"PK\x03\x04broken")
    assert carried_tasks(tmp_path, {"leaky": rows}) == []
    (tmp_path / "blob.bin").write_bytes(b"\0" * 7 + public_data()[0][80:].astype("<f4").tobytes())
    assert [(c.slug, c.found) for c in carried_tasks(tmp_path, {"leaky": rows})] == [("leaky", 40)]


def test_a_file_is_read_only_so_far_whatever_it_unpacks_to(tmp_path, monkeypatch):
    """What one file may make the worker hold is bounded: its first MAX_READ bytes, MAX_VALUES values."""
    rows = {tuple(f"{v:.6g}" for v in row) for row in public_data()[0][80:]}
    data, labels = public_data()
    text = "x" * 5000 + "\n" + csv_text(data, labels)  # the rows past a long first line
    (tmp_path / "late.csv.gz").write_bytes(gzip.compress(text.encode()))
    assert [c.slug for c in carried_tasks(tmp_path, {"leaky": rows})] == ["leaky"]
    monkeypatch.setattr("runner.agents.answers.MAX_READ", 4000)  # the rows lie past what is read
    assert carried_tasks(tmp_path, {"leaky": rows}) == []
    monkeypatch.setattr("runner.agents.answers.MAX_READ", 10**7)
    monkeypatch.setattr("runner.agents.answers.MAX_VALUES", 100)  # past the values a stream keeps
    monkeypatch.setattr("runner.agents.answers.MAX_TABLE_ROWS", 3)
    assert carried_tasks(tmp_path, {"leaky": rows}) == []
