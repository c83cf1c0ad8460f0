"""The ranking generation: what the leaderboard's cache is keyed by. (Submissions are runner's: a ``Batch`` someone
asked for, ``runner/agents/submissions.py``; uploaded logs are ``runner/logs/``.)"""

from django.db import models


class RankingGeneration(models.Model):
    """One row that changes, in the same transaction, with every write that can change a ranking figure: database
    triggers (migration 0001) bump it when a run's counted fields change while it is ended or ends, and when an
    agent's name, version or visibility, a task's slug, category, enabled flag or current version, or a version's
    baseline or reference score changes, and (migration 0002) when a review tag is written, changed or removed: the
    board shows how many of a row's runs carry each tag. A live run's heartbeats and steps bump nothing. ``token``
    names the writing transaction (PostgreSQL's transaction id; random on SQLite, which has none), so a rolled-back
    write's generation never comes back, and ``number`` counts the writes: ``token:number`` names one state of
    everything rankings read. Why triggers and not a summary table, and what they cost: ``leaderboard.cache``."""

    number = models.BigIntegerField(default=0)
    token = models.CharField(max_length=40, default="")

    def __str__(self) -> str:
        return f"{self.token}:{self.number}"
