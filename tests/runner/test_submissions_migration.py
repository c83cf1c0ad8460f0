"""Migration 0030 moves each batch's approval to a Submission of its own and loses none: the pending, approved
and rejected requests keep their decision, who made it and why; a batch nobody asked for gets none."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("runner", "0029_blobs_out_of_packs")]
AFTER = [("runner", "0030_submissions_of_their_own")]


def migrate(to):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(to)
    return executor.loader.project_state(to).apps


@pytest.fixture
def migrated_back():
    """The test database as it stood before 0030; brought back to the latest migrations afterwards."""
    yield migrate(BEFORE)
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_every_decision_moves_to_a_submission_with_the_batchs_id(migrated_back):
    apps = migrated_back
    User = apps.get_model("auth", "User")
    Agent = apps.get_model("runner", "Agent")
    Batch = apps.get_model("runner", "Batch")
    asker, curator = User.objects.create(username="asker"), User.objects.create(username="curator")
    agent = Agent.objects.create(name="a", entrypoint="a")
    pending = Batch.objects.create(agent=agent, created_by=asker, approval="pending")
    approved = Batch.objects.create(agent=agent, created_by=asker, approval="approved", decided_by=curator)
    rejected = Batch.objects.create(
        agent=agent, created_by=asker, approval="rejected", decided_by=curator, rejection_reason="too costly"
    )
    orphan = Batch.objects.create(agent=agent, created_by=None, approval="pending")  # its asker deleted since
    command = Batch.objects.create(agent=agent, created_by=None)  # bench_run's: approved, asked by no one

    apps = migrate(AFTER)
    rows = apps.get_model("runner", "Submission").objects.values_list(
        "batch_id", "approval", "decided_by_id", "rejection_reason"
    )
    assert sorted(rows) == [
        (pending.pk, "pending", None, ""),
        (approved.pk, "approved", curator.pk, ""),
        (rejected.pk, "rejected", curator.pk, "too costly"),
        (orphan.pk, "pending", None, ""),
    ]
    assert apps.get_model("runner", "Batch").objects.filter(pk=command.pk).exists()
