"""The "reviewer" group: its members tag runs and steps with failure modes (bench.roles.is_reviewer)."""

from django.db import migrations

REVIEWER_GROUP = "reviewer"  # bench.roles.REVIEWER_GROUP, as it was when this migration was written


def create(apps, schema_editor):
    apps.get_model("auth", "Group").objects.get_or_create(name=REVIEWER_GROUP)


def remove(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=REVIEWER_GROUP).delete()


class Migration(migrations.Migration):
    dependencies = [("runner", "0011_review_tags"), ("auth", "0012_alter_user_first_name_max_length")]

    operations = [migrations.RunPython(create, remove)]
