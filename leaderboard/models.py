"""The ranking generation: what the leaderboard's cache is keyed by. (Submissions are runner's: a ``Batch`` someone
asked for, ``runner/agents/submissions.py``; uploaded logs are ``runner/logs/``.)"""

from django.conf import settings
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


class Reproduction(models.Model):
    """A re-run of a leaderboard row (an agent version and model over its tasks) or of one run, with exactly what
    the original runs recorded: a batch whose plan (``runner.Batch.plan``) names each task version, the number of
    runs, the fast and edit models and the limits. What could not be the same any more is named in ``differences``
    (``exact`` False then); what would have been refused was never written (``leaderboard.services``). The verdict
    is read from the runs once the batch has ended (``leaderboard.reproductions``; the rule: docs/reproductions.md).
    Its runs are never ranked: the number it checks stays the number that was published."""

    batch = models.OneToOneField("runner.Batch", on_delete=models.CASCADE, related_name="reproduction")
    agent = models.ForeignKey("runner.Agent", on_delete=models.CASCADE, related_name="reproductions")
    model = models.CharField(max_length=200, blank=True, help_text="The row's model.")
    source_run = models.ForeignKey(
        "runner.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", help_text="Empty: a row."
    )
    original_runs = models.ManyToManyField("runner.Run", related_name="+", help_text="The runs it re-runs.")
    exact = models.BooleanField(default=True)
    differences = models.JSONField(default=list, blank=True, help_text="What is not as the original recorded.")
    spec = models.JSONField(default=dict, blank=True, help_text="What the original runs recorded, for its page.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["agent", "model", "created_at"], name="reproduction_row")]

    def __str__(self) -> str:
        return f"reproduction {self.pk} of {self.agent}{f'/{self.model}' if self.model else ''}"
