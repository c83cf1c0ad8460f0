"""The ranking generation and the triggers that bump it (see ``leaderboard.models.RankingGeneration`` and
``leaderboard.triggers``, which installs SQLite's again after every migrate)."""

from django.db import migrations, models

from leaderboard.triggers import OTHER_FIELDS, TABLE, TERMINAL, changed, sqlite_triggers

#: The run columns the runs' trigger watched as of this migration: those that existed then. Later migrations
#: (0004, 0005) make the function again with the columns added since; a live list here would name columns a
#: fresh database does not have yet when this runs.
RUN_FIELDS = (
    "status", "failure_kind", "purpose", "origin", "forked_from_id", "fork_step", "agent_id", "model", "task_id",
    "task_version_id", "final_score", "paired_baseline", "improvement", "succeeded", "cost", "tokens_in",
    "tokens_out", "wall_seconds", "steps_count",
)  # fmt: skip

#: The triggers of this migration on SQLite (leaderboard.triggers has them all; 0002 adds the review tags').
SQLITE_NAMES = ("leaderboard_runs_", "leaderboard_runner_agent_", "leaderboard_task_bank_")


def _postgresql(run_fields: tuple[str, ...] = RUN_FIELDS) -> tuple[list[str], list[str]]:
    bump = (
        f"INSERT INTO {TABLE} (id, number, token) VALUES (1, 1, pg_current_xact_id()::text) "
        f"ON CONFLICT (id) DO UPDATE SET number = {TABLE}.number + 1, token = EXCLUDED.token"
    )
    ended = f"status IN {TERMINAL}"
    forward = [
        f"CREATE FUNCTION leaderboard_ranking_bump() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {bump}; "
        "RETURN NULL; END $$",
        # Runs: per statement (a bulk insert or update bumps once), from the rows it changed.
        "CREATE FUNCTION leaderboard_runs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF EXISTS (SELECT 1 FROM changed WHERE {ended}) THEN {bump}; END IF; RETURN NULL; END $$",
        "CREATE FUNCTION leaderboard_runs_updated() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF EXISTS (SELECT 1 FROM before_rows o JOIN after_rows n ON n.id = o.id "
        f"WHERE (o.{ended} OR n.{ended}) AND ({changed(run_fields, 'o', 'n')})) THEN {bump}; END IF; "
        "RETURN NULL; END $$",
        "CREATE TRIGGER leaderboard_runs_insert AFTER INSERT ON runner_run REFERENCING NEW TABLE AS changed "
        "FOR EACH STATEMENT EXECUTE FUNCTION leaderboard_runs_inserted()",
        "CREATE TRIGGER leaderboard_runs_delete AFTER DELETE ON runner_run REFERENCING OLD TABLE AS changed "
        "FOR EACH STATEMENT EXECUTE FUNCTION leaderboard_runs_inserted()",
        "CREATE TRIGGER leaderboard_runs_update AFTER UPDATE ON runner_run "
        "REFERENCING OLD TABLE AS before_rows NEW TABLE AS after_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION leaderboard_runs_updated()",
    ]
    for table, fields in OTHER_FIELDS.items():
        forward += [
            f"CREATE TRIGGER leaderboard_{table}_update AFTER UPDATE ON {table} FOR EACH ROW "
            f"WHEN ({changed(fields)}) EXECUTE FUNCTION leaderboard_ranking_bump()",
            f"CREATE TRIGGER leaderboard_{table}_delete AFTER DELETE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION leaderboard_ranking_bump()",
        ]
    backward = [
        "DROP TRIGGER IF EXISTS leaderboard_runs_insert ON runner_run",
        "DROP TRIGGER IF EXISTS leaderboard_runs_delete ON runner_run",
        "DROP TRIGGER IF EXISTS leaderboard_runs_update ON runner_run",
        *(f"DROP TRIGGER IF EXISTS leaderboard_{t}_{op} ON {t}" for t in OTHER_FIELDS for op in ("update", "delete")),
        "DROP FUNCTION IF EXISTS leaderboard_runs_updated()",
        "DROP FUNCTION IF EXISTS leaderboard_runs_inserted()",
        "DROP FUNCTION IF EXISTS leaderboard_ranking_bump()",
    ]
    return forward, backward


def _sqlite() -> tuple[list[str], list[str]]:
    triggers = {name: sql for name, sql in sqlite_triggers().items() if name.startswith(SQLITE_NAMES)}
    return list(triggers.values()), [f"DROP TRIGGER IF EXISTS {name}" for name in triggers]


def _statements(schema_editor, *, forward: bool) -> list[str]:
    vendor = schema_editor.connection.vendor
    if vendor not in ("postgresql", "sqlite"):
        return []  # no triggers: leaderboard.cache reads no generation and computes every time
    create, drop = _postgresql() if vendor == "postgresql" else _sqlite()
    return create if forward else drop


def triggers_create(apps, schema_editor) -> None:
    for statement in _statements(schema_editor, forward=True):
        schema_editor.execute(statement, params=None)


def triggers_drop(apps, schema_editor) -> None:
    for statement in _statements(schema_editor, forward=False):
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("runner", "0010_run_origin"),
        ("task_bank", "0002_measured_baselines"),
    ]

    operations = [
        migrations.CreateModel(
            name="RankingGeneration",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("number", models.BigIntegerField(default=0)),
                ("token", models.CharField(default="", max_length=40)),
            ],
        ),
        migrations.RunPython(triggers_create, triggers_drop),
    ]
