"""The table of the shared counters (core.shared_cache.count_hit): one row per limit's key and window, incremented in
one statement, so that requests sent at the same instant each get a count of their own."""

from django.db import migrations

COUNTER_TABLE = "bench_shared_counter"  # core.shared_cache.COUNTER_TABLE, spelled here so this never changes


class Migration(migrations.Migration):
    dependencies = [
        ("runner", "0018_failure_kind_task"),
    ]

    operations = [
        migrations.RunSQL(
            f"CREATE TABLE {COUNTER_TABLE} (key varchar(255) NOT NULL PRIMARY KEY, count integer NOT NULL, "
            "expires bigint NOT NULL)",
            f"DROP TABLE {COUNTER_TABLE}",
        ),
        migrations.RunSQL(
            f"CREATE INDEX {COUNTER_TABLE}_expires ON {COUNTER_TABLE} (expires)",
            f"DROP INDEX {COUNTER_TABLE}_expires",
        ),
    ]
