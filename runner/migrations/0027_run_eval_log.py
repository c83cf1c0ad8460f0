from django.db import migrations, models


def validation_runs_neither_succeed_nor_fail(apps, schema_editor):
    """A validation run measures its task's baseline: it is no trial, so it has no success (the badge said so)."""
    apps.get_model("runner", "Run").objects.filter(purpose="validation").exclude(succeeded=None).update(succeeded=None)


class Migration(migrations.Migration):
    dependencies = [
        ("runner", "0026_run_queue_demo"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="eval_log",
            field=models.TextField(
                blank=True,
                help_text="What a scored evaluation printed (staff only: it can quote the task's hidden files).",
            ),
        ),
        migrations.RunPython(validation_runs_neither_succeed_nor_fail, migrations.RunPython.noop),
    ]
