"""The table of the shared cache (core.shared_cache): the counts of the per-user and per-address limits, one for
every web process. Created whatever BENCH_SHARED_CACHE_URL says, so the database cache works whenever it is chosen."""

from django.core.management import call_command
from django.db import migrations

SHARED_CACHE_TABLE = "bench_shared_cache"  # core.shared_cache.SHARED_CACHE_TABLE, spelled here so this never changes


def table_create(apps, schema_editor):
    call_command("createcachetable", SHARED_CACHE_TABLE, database=schema_editor.connection.alias, verbosity=0)


def table_drop(apps, schema_editor):
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(SHARED_CACHE_TABLE)}")


class Migration(migrations.Migration):
    dependencies = [
        ("runner", "0016_run_score_pending"),
    ]

    operations = [migrations.RunPython(table_create, table_drop)]
