"""The runs' update trigger watches improved_any_step too (MLAgentBench's "success at any step" on the leaderboard):
a step scored after its run ended changes a ranking figure. PostgreSQL: the function is made again with the
columns of then; SQLite's triggers are installed again after every migrate (``triggers``)."""

import importlib

from django.db import migrations


def function_replace(apps, schema_editor, run_fields: tuple[str, ...] | None = None) -> None:
    """Make the runs' update function again, watching ``run_fields`` (this migration's: 0001's and
    improved_any_step)."""
    if schema_editor.connection.vendor != "postgresql":
        return
    first = importlib.import_module("leaderboard.migrations.0001_ranking_generation")
    forward, _ = first._postgresql(run_fields or (*first.RUN_FIELDS, "improved_any_step"))
    (updated,) = [
        statement for statement in forward if statement.startswith("CREATE FUNCTION leaderboard_runs_updated")
    ]
    schema_editor.execute(updated.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1), params=None)


class Migration(migrations.Migration):
    dependencies = [("leaderboard", "0003_reproductions")]
    operations = [migrations.RunPython(function_replace, migrations.RunPython.noop)]
