"""A submission is a model of its own: the approval that was on its batch (approval, decided_by, decided_at,
rejection_reason) moves to a Submission whose id is its batch's. Every batch someone asked for (created_by), or
that was ever waiting or decided, gets one; the others (a command's, the demo's) were never submissions."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import Q


def submissions_from_batches(apps, schema_editor):
    Batch = apps.get_model("runner", "Batch")
    Submission = apps.get_model("runner", "Submission")
    asked = Q(created_by__isnull=False) | ~Q(approval="approved") | Q(decided_by__isnull=False)
    Submission.objects.bulk_create(
        Submission(
            batch_id=batch.pk,
            approval=batch.approval,
            decided_by_id=batch.decided_by_id,
            decided_at=batch.decided_at,
            rejection_reason=batch.rejection_reason,
        )
        for batch in Batch.objects.filter(asked).iterator(chunk_size=2000)
    )


def batches_from_submissions(apps, schema_editor):
    Batch = apps.get_model("runner", "Batch")
    for submission in apps.get_model("runner", "Submission").objects.iterator(chunk_size=2000):
        Batch.objects.filter(pk=submission.batch_id).update(
            approval=submission.approval,
            decided_by_id=submission.decided_by_id,
            decided_at=submission.decided_at,
            rejection_reason=submission.rejection_reason,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("runner", "0029_blobs_out_of_packs"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Submission",
            fields=[
                (
                    "batch",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="submission",
                        serialize=False,
                        to="runner.batch",
                    ),
                ),
                (
                    "approval",
                    models.CharField(
                        choices=[
                            ("pending", "Waiting for approval"),
                            ("approved", "Approved"),
                            ("rejected", "Rejected"),
                        ],
                        db_index=True,
                        default="pending",
                        max_length=16,
                    ),
                ),
                ("decided_at", models.DateTimeField(blank=True, null=True)),
                ("rejection_reason", models.TextField(blank=True)),
                (
                    "decided_by",
                    models.ForeignKey(
                        blank=True,
                        help_text="Who approved or rejected it; empty when approved by BENCH_AUTO_APPROVE_SUBMISSIONS.",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="submissions_decided",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"ordering": ["-batch__created_at"]},
        ),
        migrations.RunPython(submissions_from_batches, batches_from_submissions),
        migrations.RemoveField(model_name="batch", name="approval"),
        migrations.RemoveField(model_name="batch", name="decided_at"),
        migrations.RemoveField(model_name="batch", name="decided_by"),
        migrations.RemoveField(model_name="batch", name="rejection_reason"),
    ]
