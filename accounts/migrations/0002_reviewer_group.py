"""The reviewer role is membership of this group (core.roles.is_reviewer): staff add people to it in the admin."""

from django.db import migrations

REVIEWER_GROUP = "reviewer"  # core.roles.REVIEWER_GROUP, spelled here so the migration never changes


def group_create(apps, schema_editor):
    apps.get_model("auth", "Group").objects.get_or_create(name=REVIEWER_GROUP)


def group_delete(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=REVIEWER_GROUP).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_api_token"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(group_create, group_delete)]
