from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate


def _ranking_triggers_reinstall(*, using: str = "default", **kwargs) -> None:
    """After every migrate: SQLite rebuilds a table it alters, and the ranking triggers on it go with the old one
    (``leaderboard.triggers``)."""
    from .triggers import sqlite_triggers_install

    sqlite_triggers_install(connections[using])


class LeaderboardConfig(AppConfig):
    name = "leaderboard"
    verbose_name = "Leaderboard"

    def ready(self) -> None:
        post_migrate.connect(_ranking_triggers_reinstall, sender=self, dispatch_uid="leaderboard-triggers")
