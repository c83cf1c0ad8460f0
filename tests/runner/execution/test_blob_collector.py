"""The collector (runner/execution/collector.py): blobs nothing names go once past their grace period, so deleting a
run frees what only it held; what any run, step or prepared task names stays; a blob stored again meanwhile stays;
agent package and prepared task folders nothing uses go; a prepared task whose blobs went is stored again."""

import io
import os
import secrets
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from runner.execution import run_execute
from runner.execution.collector import ASIDE_SUFFIX, blobs_collect
from runner.execution.preparation import task_version_prepare
from runner.logs.exports import log_export
from runner.models import Run
from runner.services import run_create
from runner.workspace.snapshots import BlobStore
from tests.factories import AgentFactory, RunFactory

FINAL = {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}}
LONG_AGO = time.time() - 10 * 86400


@pytest.fixture(autouse=True)
def own_data_folder(settings, tmp_path):
    """A blob store, data folder and prepared-task folder of this test's own: the collector takes what this test's
    database does not name, which is everything other tests stored."""
    settings.BENCH_BLOB_DIR = tmp_path / "blobs"
    settings.BENCH_DATA_DIR = tmp_path / "data"
    settings.BENCH_TASK_CACHE_DIR = tmp_path / "tasks"


def write(name: str, content: str) -> dict:
    return {"type": "act", "action": "Write File", "input": {"file_name": name, "content": content}}


def age_all(store: BlobStore) -> None:
    """Every stored blob as old as the grace period allows to collect."""
    for path in store.root.glob("*/*"):
        os.utime(path, (LONG_AGO, LONG_AGO))


def scripted_run(version, script: list) -> Run:
    return run_execute(run_create(task=version.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)


@pytest.mark.django_db(transaction=True)
def test_deleting_a_run_frees_what_only_it_held_and_keeps_what_another_run_names(tiny_task):
    shared, own = secrets.token_hex(200_000), secrets.token_hex(200_000)
    deleted = scripted_run(tiny_task, [write("shared.txt", shared), write("own.txt", own), FINAL])
    kept = scripted_run(tiny_task, [write("shared.txt", shared), FINAL])
    store = BlobStore()
    age_all(store)
    own_sha = store.manifest_load(deleted.final_snapshot)["own.txt"][0]
    shared_sha = store.manifest_load(kept.final_snapshot)["shared.txt"][0]

    assert blobs_collect(grace_s=0).removed == 0  # everything is named by a run, a step or the prepared task

    Run.objects.filter(pk=deleted.pk).delete()
    done = blobs_collect(grace_s=0)

    assert not store.has(own_sha) and store.has(shared_sha)
    assert done.removed >= 2 and done.freed_bytes >= 100_000  # own.txt and the deleted run's manifests
    assert blobs_collect(grace_s=0).removed == 0
    for step in kept.steps.all():  # the run left is whole: every snapshot loads and every blob it names is there
        assert all(store.has(sha) for sha, _ in store.manifest_load(step.snapshot).values())
    assert log_export(run=kept, out=store.root.parent / "kept.zip") == 2


@pytest.mark.django_db
def test_a_blob_younger_than_the_grace_period_or_stored_again_is_kept():
    store = BlobStore()
    young, stored_again, old = (store.put_bytes(secrets.token_bytes(5000)) for _ in range(3))
    for sha in (stored_again, old):
        os.utime(store.path(sha), (LONG_AGO, LONG_AGO))
    assert store.put_bytes(store.read_bytes(stored_again)) == stored_again  # as a step about to name it would

    done = blobs_collect(grace_s=3600)

    assert (store.has(young), store.has(stored_again), store.has(old)) == (True, True, False)
    assert done.removed == 1


@pytest.mark.django_db
def test_a_named_blob_a_stopped_pass_left_aside_is_put_back(tiny_task):
    store = BlobStore()
    sha = store.put_bytes(secrets.token_bytes(5000))
    RunFactory(task_version=tiny_task, final_snapshot=store.manifest_save({"kept.bin": [sha, 5000]}))
    aside = store.path(sha).with_name(store.path(sha).name + ASIDE_SUFFIX)
    os.rename(store.path(sha), aside)

    blobs_collect(grace_s=0)

    assert store.path(sha).exists() and not aside.exists()


@pytest.mark.django_db
def test_dry_run_counts_and_removes_nothing_and_the_command_says_what_went(settings):
    store = BlobStore()
    sha = store.put_bytes(secrets.token_bytes(10_000))
    os.utime(store.path(sha), (LONG_AGO, LONG_AGO))
    out = io.StringIO()

    call_command("collect_blobs", "--dry-run", stdout=out)
    assert out.getvalue().startswith("would remove 1 blobs (0.0 MB on disk) and 0 unused folders")
    assert store.has(sha)
    call_command("collect_blobs", stdout=(out := io.StringIO()))
    assert out.getvalue().startswith("removed 1 blobs") and not store.has(sha)


@pytest.mark.django_db
def test_agent_package_and_prepared_task_folders_nothing_uses_go(settings, tiny_task):
    packages = Path(settings.BENCH_DATA_DIR) / "agent_packages"
    for folder in (packages / "used-digest", packages / "unused-digest", Path(settings.BENCH_TASK_CACHE_DIR) / "gone"):
        folder.mkdir(parents=True)
        os.utime(folder, (LONG_AGO, LONG_AGO))
    AgentFactory(package_digest="used-digest", package_path=str(packages / "used-digest"))
    prepared = task_version_prepare(tiny_task)  # the version's own prepared folder: in use
    os.utime(prepared.root, (LONG_AGO, LONG_AGO))

    done = blobs_collect(grace_s=0)

    assert sorted(Path(path).name for path in done.folders) == ["gone", "unused-digest"]
    assert (packages / "used-digest").is_dir() and prepared.root.is_dir()
    assert not (packages / "unused-digest").exists()


@pytest.mark.django_db(transaction=True)
def test_a_prepared_task_whose_blobs_another_hosts_collector_took_is_stored_again(tiny_task):
    prepared = task_version_prepare(tiny_task)
    store = BlobStore()
    for path in store.root.glob("*/*"):  # what a collector that saw no run of this task would remove
        path.unlink()

    again = task_version_prepare(tiny_task)

    assert again.env_manifest_sha == prepared.env_manifest_sha
    assert all(store.has(sha) for sha, _ in again.env_manifest.values())
    assert scripted_run(tiny_task, [FINAL]).status == "finished"
