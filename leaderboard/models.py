"""The ranking generation: what the leaderboard's cache is keyed by. Submissions (uploaded agents and traces) will
live here too; see DESIGN.md."""

from django.db import models


class RankingGeneration(models.Model):
    """One row that changes, in the same transaction, with every write that can change a ranking figure: database
    triggers (migration 0001) bump it when a run's counted fields change while it is ended or ends, and when an
    agent's name, version or visibility, a task's slug, category, enabled flag or current version, or a version's
    baseline or reference score changes. ``token`` names the writing transaction (a rolled-back one's is never
    used again) and ``number`` counts the writes, so ``token:number`` names one state of everything rankings read."""

    number = models.BigIntegerField(default=0)
    token = models.CharField(max_length=40, default="")

    def __str__(self) -> str:
        return f"{self.token}:{self.number}"
