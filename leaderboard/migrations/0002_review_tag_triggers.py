"""Review tags are on the leaderboard (how many of a row's runs carry each): a tag written, changed or removed
bumps the ranking generation, as the writes of 0001 do."""

from django.db import migrations

TABLE = "leaderboard_rankinggeneration"
OPERATIONS = ("insert", "update", "delete")


def _statements(schema_editor, *, forward: bool) -> list[str]:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        if not forward:
            return [
                f"DROP TRIGGER IF EXISTS leaderboard_runner_reviewtag_{op} ON runner_reviewtag" for op in OPERATIONS
            ]
        return [
            f"CREATE TRIGGER leaderboard_runner_reviewtag_{op} AFTER {op.upper()} ON runner_reviewtag "
            "FOR EACH STATEMENT EXECUTE FUNCTION leaderboard_ranking_bump()"
            for op in OPERATIONS
        ]
    if vendor == "sqlite":
        if not forward:
            return [f"DROP TRIGGER IF EXISTS leaderboard_runner_reviewtag_{op}" for op in OPERATIONS]
        bump = (
            f"INSERT INTO {TABLE} (id, number, token) VALUES (1, 1, lower(hex(randomblob(16)))) "
            f"ON CONFLICT (id) DO UPDATE SET number = {TABLE}.number + 1, token = excluded.token;"
        )
        return [
            f"CREATE TRIGGER leaderboard_runner_reviewtag_{op} AFTER {op.upper()} ON runner_reviewtag BEGIN {bump} END"
            for op in OPERATIONS
        ]
    return []  # no triggers: leaderboard.cache reads no generation and computes every time


def triggers_create(apps, schema_editor) -> None:
    for statement in _statements(schema_editor, forward=True):
        schema_editor.execute(statement, params=None)


def triggers_drop(apps, schema_editor) -> None:
    for statement in _statements(schema_editor, forward=False):
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("leaderboard", "0001_ranking_generation"), ("runner", "0011_review_tags")]

    operations = [migrations.RunPython(triggers_create, triggers_drop)]
