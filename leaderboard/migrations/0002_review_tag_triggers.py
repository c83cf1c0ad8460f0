"""Review tags are on the leaderboard (how many of a row's runs carry each): a tag written, changed or removed
bumps the ranking generation, as the writes of 0001 do."""

from django.db import migrations

from leaderboard.triggers import OPERATIONS, sqlite_triggers


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
        names = [f"leaderboard_runner_reviewtag_{op}" for op in OPERATIONS]
        if not forward:
            return [f"DROP TRIGGER IF EXISTS {name}" for name in names]
        return [sqlite_triggers()[name] for name in names]
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
