"""The database triggers that bump the ranking generation (``models.RankingGeneration``), as SQL: what migrations 0001
and 0002 install, and what ``sqlite_triggers_install`` installs again after every ``migrate`` on SQLite.

SQLite cannot alter most of a table in place: Django rebuilds it (a new table, the rows copied, the old one dropped),
and the triggers on the old table go with it. Every later migration that adds a column to the runs, the agents or
the task versions would leave the leaderboard's cache deaf to them (a run that ended changed no page). PostgreSQL
alters in place and keeps them. Triggers, not calls in the code that writes: runner must not know of rankings (it
imports nothing of leaderboard), and every writer is covered this way, the admin, bulk updates, cascades and
management commands included. They watch only what rankings read, so a live run's heartbeats and step counts bump
nothing."""

from __future__ import annotations

TERMINAL = "('finished', 'failed', 'cancelled', 'timed_out')"
#: What rankings read of a run (selectors.counted_runs and ENTRANT, sums.run_sums and NORMALISED, the charts). A
#: column added here needs a migration that makes PostgreSQL's function again with it (as 0004 and 0005 do).
RUN_FIELDS = (
    "status", "failure_kind", "purpose", "origin", "forked_from_id", "fork_step", "agent_id", "model", "task_id",
    "task_version_id", "final_score", "paired_baseline", "improvement", "succeeded", "cost", "tokens_in",
    "tokens_out", "wall_seconds", "steps_count", "improved_any_step", "review",
)  # fmt: skip
#: What rankings read of the other tables: an entrant's name and who may see it, which tasks and versions count.
OTHER_FIELDS = {
    "runner_agent": ("name", "version", "visibility", "owner_id"),
    "task_bank_task": ("slug", "category", "is_enabled", "current_version_id"),
    "task_bank_taskversion": ("task_id", "baseline_score", "reference_score", "higher_is_better"),
}
TABLE = "leaderboard_rankinggeneration"
OPERATIONS = ("insert", "update", "delete")


def changed(fields: tuple[str, ...], old: str = "OLD", new: str = "NEW", *, distinct: str = "IS DISTINCT FROM") -> str:
    return " OR ".join(f"{old}.{f} {distinct} {new}.{f}" for f in fields)


def sqlite_triggers() -> dict[str, str]:
    """Every trigger of SQLite's, by name: its ``CREATE TRIGGER`` statement. SQLite has row triggers only; the token
    is random (it has no transaction ids)."""
    bump = (
        f"INSERT INTO {TABLE} (id, number, token) VALUES (1, 1, lower(hex(randomblob(16)))) "
        f"ON CONFLICT (id) DO UPDATE SET number = {TABLE}.number + 1, token = excluded.token;"
    )
    when = {
        "leaderboard_runs_insert": f"AFTER INSERT ON runner_run WHEN NEW.status IN {TERMINAL}",
        "leaderboard_runs_delete": f"AFTER DELETE ON runner_run WHEN OLD.status IN {TERMINAL}",
        "leaderboard_runs_update": f"AFTER UPDATE ON runner_run WHEN (OLD.status IN {TERMINAL} "
        f"OR NEW.status IN {TERMINAL}) AND ({changed(RUN_FIELDS, distinct='IS NOT')})",
    }
    for table, fields in OTHER_FIELDS.items():
        when[f"leaderboard_{table}_update"] = f"AFTER UPDATE ON {table} WHEN {changed(fields, distinct='IS NOT')}"
        when[f"leaderboard_{table}_delete"] = f"AFTER DELETE ON {table}"
    for op in OPERATIONS:  # review tags are on the leaderboard (migration 0002)
        when[f"leaderboard_runner_reviewtag_{op}"] = f"AFTER {op.upper()} ON runner_reviewtag"
    return {name: f"CREATE TRIGGER {name} {condition} BEGIN {bump} END" for name, condition in when.items()}


def sqlite_triggers_install(connection) -> list[str]:
    """Install SQLite's triggers again (each dropped first, so this can run after any migration); the names of
    those that were missing. Nothing on another database, whose triggers survive its migrations."""
    if connection.vendor != "sqlite":
        return []
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        present = {row[0] for row in cursor.fetchall()}
        for name, statement in sqlite_triggers().items():
            cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
            cursor.execute(statement)
    return sorted(set(sqlite_triggers()) - present)
