"""The runs' update trigger watches review too: a held run cleared or rejected by a reviewer changes what rankings
count. PostgreSQL: the function is made again with the columns of then (0001's, improved_any_step and review: a
later column gets a migration of its own, so that none is named before it exists); SQLite's triggers are installed
again after every migrate (``triggers``)."""

import importlib

from django.db import migrations


def function_replace(apps, schema_editor) -> None:
    first = importlib.import_module("leaderboard.migrations.0001_ranking_generation")
    earlier = importlib.import_module("leaderboard.migrations.0004_any_step_trigger")
    fields = (*first.RUN_FIELDS, "improved_any_step", "review")
    earlier.function_replace(apps, schema_editor, run_fields=fields)


class Migration(migrations.Migration):
    dependencies = [("leaderboard", "0004_any_step_trigger"), ("runner", "0032_run_review")]
    operations = [migrations.RunPython(function_replace, migrations.RunPython.noop)]
