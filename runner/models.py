from __future__ import annotations

import builtins
import re
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from task_bank.models import Task, TaskVersion


def error_summary(text: str, limit: int = 300) -> str:
    """The last non-empty line of an error log (for a traceback: the exception and its message)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:limit] if lines else ""


EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")
#: The exceptions named to anyone: Python's own. Another's name is code's choice, and could be made of hidden text.
BUILTIN_EXCEPTIONS = frozenset(
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
)


def eval_error_public(text: str) -> str:
    """What anyone may see of an evaluation's error: what failed, in the platform's words (the log's first line up
    to the first quote or colon), and the type of the exception that ended it, never its message nor anything else
    the evaluation printed: code of a submission that the evaluation ran can put hidden task files' text there.
    Staff see the whole log."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    head = re.split(r"[:'\"(]", lines[0], maxsplit=1)[0].strip()[:120]
    last = EXCEPTION_LINE.match(lines[-1]) if len(lines) > 1 else None
    kind = last.group(1) if last else ""
    if kind and kind not in BUILTIN_EXCEPTIONS:
        kind = "an exception of its own"
    return f"{head}: {kind}" if kind else head


class Agent(models.Model):
    """An agent program: built in (a module of ``mlab_agents``) or an uploaded package."""

    class Kind(models.TextChoices):
        BUILTIN = "builtin", "Built-in"
        PACKAGE = "package", "Uploaded package"
        EXTERNAL = "external", "External (imported runs only)"

    class Visibility(models.TextChoices):
        PUBLIC = "public", "Public"
        PRIVATE = "private", "Private"

    name = models.SlugField(max_length=100)
    version = models.CharField(max_length=40, default="1")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.BUILTIN)
    entrypoint = models.CharField(max_length=200, help_text="Python module run with python -m.")
    package_digest = models.CharField(max_length=64, blank=True)
    package_path = models.CharField(max_length=500, blank=True)
    description = models.TextField(blank=True)
    default_model = models.CharField(max_length=200, blank=True)
    uses_llm = models.BooleanField(default=False)
    config = models.JSONField(default=dict, blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    visibility = models.CharField(max_length=16, choices=Visibility.choices, default=Visibility.PUBLIC)

    class Smoke(models.TextChoices):
        """Where an uploaded package's smoke test is (``runner.agents.smoke``): run by a worker, never in a request."""

        NONE = "", "Not needed"  # built in, or imported by staff without one
        PENDING = "pending", "Waiting for a worker"
        PASSED = "passed", "Passed"
        FAILED = "failed", "Failed"

    smoke_state = models.CharField(max_length=16, choices=Smoke.choices, default=Smoke.NONE, blank=True)
    smoke_error = models.TextField(blank=True, help_text="Why the smoke test failed, with the agent's stderr tail.")
    smoke_sent_at = models.DateTimeField(null=True, blank=True, help_text="When its smoke-test job was last sent.")
    smoke_attempts = models.PositiveSmallIntegerField(default=0, help_text="Smoke-test jobs started.")
    smoke_tested_at = models.DateTimeField(
        null=True, blank=True, help_text="When the smoke test ended (passed or failed); empty: not ended."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-created_at"]
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="agent_unique_version")]

    def __str__(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def is_trusted(self) -> bool:
        return self.kind == self.Kind.BUILTIN

    @property
    def smoke_refusal(self) -> str:
        """Why no run of this agent can be queued yet ("" when its runs can be): its smoke test has not passed."""
        if self.smoke_state == self.Smoke.FAILED:
            return f"agent {self} failed its smoke test ({self.smoke_error[:300]}); upload a version that passes it"
        if self.smoke_state == self.Smoke.PENDING:
            return f"agent {self} waits for its smoke test; runs of it can be queued once it passes"
        return ""


@dataclass(frozen=True)
class RunLimits:
    """The four limits of a run: its steps, its time, and its two budgets (tokens and cost: a run's model calls may
    spend that much, no more). As asked for, None means the task's own (steps, time) or no budget (tokens, cost);
    ``for_version`` fills in the task's. A run's own limits are ``run.limits``."""

    max_steps: int | None = None
    max_time_s: int | None = None
    max_tokens: int | None = None
    max_cost: Decimal | None = None

    NAMES = ("max_steps", "max_time_s", "max_tokens", "max_cost")
    # The largest each can be: what its column holds.
    MOST = {"max_steps": 2**31 - 1, "max_time_s": 2**31 - 1, "max_tokens": 2**63 - 1, "max_cost": Decimal("999999")}

    def check(self) -> None:
        """ValueError naming the first limit out of range."""
        for name in self.NAMES:
            value, least, most = getattr(self, name), 0 if name == "max_cost" else 1, self.MOST[name]
            if value is not None and value < least:
                raise ValueError(f"{name} must be at least {least} (or left out), got {value}")
            if value is not None and value > most:
                raise ValueError(f"{name} must be at most {most} (or left out), got {value}")

    def for_version(self, version: TaskVersion) -> RunLimits:
        return RunLimits(
            max_steps=self.max_steps or version.max_steps,
            max_time_s=self.max_time_s or version.max_time_s,
            max_tokens=self.max_tokens,
            max_cost=self.max_cost,
        )

    def as_fields(self) -> dict:
        """The Run fields these limits set."""
        return {name: getattr(self, name) for name in self.NAMES}

    def as_message(self) -> dict:
        """The limits as the agent protocol sends them (JSON numbers)."""
        return {**self.as_fields(), "max_cost": float(self.max_cost) if self.max_cost is not None else None}


@dataclass(frozen=True)
class RunSpec:
    """What runs are asked with: the agent, its models and its limits. ``model`` is the main model; the fast and
    edit models, when given, are more endpoints the run may use (``Run.models_allowed``)."""

    agent: Agent
    model: str = ""
    fast_model: str = ""
    edit_model: str = ""
    limits: RunLimits = RunLimits()

    def as_fields(self) -> dict:
        """The agent and models as a Run's or a Batch's fields (the limits differ: a run takes its task's)."""
        return {"agent": self.agent, "model": self.model, "fast_model": self.fast_model, "edit_model": self.edit_model}


class Batch(models.Model):
    """Runs launched together: one agent x tasks x repeats, as asked for (the tasks, models and limits are kept).
    One that someone asked for (``created_by``) and staff decide on has a ``Submission``; a reproduction's names
    its runs exactly (``plan``)."""

    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="batches")
    tasks = models.ManyToManyField(Task, blank=True, related_name="+", help_text="The tasks asked for.")
    model = models.CharField(max_length=200, blank=True)
    fast_model = models.CharField(max_length=200, blank=True)
    edit_model = models.CharField(max_length=200, blank=True)
    repeats = models.PositiveIntegerField(default=1)
    max_steps = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: each task's own.")
    max_time_s = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: each task's own.")
    max_tokens = models.PositiveBigIntegerField(null=True, blank=True, help_text="Empty: no budget.")
    max_cost = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, help_text="Empty: no budget."
    )
    note = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, help_text="Who asked for it."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    plan = models.JSONField(
        default=list,
        blank=True,
        help_text="A reproduction's runs, exactly: [{task, version, runs, fast_model, edit_model, max_steps, "
        "max_time_s, max_tokens, max_cost}] (services.batch_plan_create); empty: tasks x repeats.",
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "batches"

    def __str__(self) -> str:
        return f"batch {self.pk} ({self.agent})"

    @property
    def limits(self) -> RunLimits:
        """The limits asked for (None: the task's own, or no budget)."""
        return RunLimits(
            max_steps=self.max_steps, max_time_s=self.max_time_s, max_tokens=self.max_tokens, max_cost=self.max_cost
        )

    @property
    def spec(self) -> RunSpec:
        """What its runs were asked with."""
        return RunSpec(self.agent, self.model, self.fast_model, self.edit_model, self.limits)


class Submission(models.Model):
    """A request for a batch of runs that staff decide on. Staff's is approved at once, a submitter's waits for
    staff (or ``BENCH_AUTO_APPROVE_SUBMISSIONS``); its batch gets its runs when it is approved, and a rejected one
    never gets any. Where it is after that (running, done) is read from its runs. Its id is its batch's."""

    class Approval(models.TextChoices):
        PENDING = "pending", "Waiting for approval"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    class State(models.TextChoices):
        """Where a submission is: its agent waiting for its smoke test, or smoke-tested and waiting for approval,
        rejected, approved (its runs all queued), running (some started, not all ended), done (all ended)."""

        UPLOADED = "uploaded", "Waiting for the agent's smoke test"
        SMOKE_TESTED = "smoke_tested", "Smoke-tested, waiting for approval"
        REJECTED = "rejected", "Rejected"
        APPROVED = "approved", "Approved, queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"

    batch = models.OneToOneField(Batch, on_delete=models.CASCADE, primary_key=True, related_name="submission")
    approval = models.CharField(max_length=16, choices=Approval.choices, default=Approval.PENDING, db_index=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="submissions_decided",
        help_text="Who approved or rejected it; empty when approved by BENCH_AUTO_APPROVE_SUBMISSIONS.",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    rejection_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-batch__created_at"]

    def __str__(self) -> str:
        return f"submission {self.pk} ({self.batch.agent})"

    def state_of(self, *, runs: int, queued: int, ended: int) -> str:
        """The state, from its runs' counts (``selectors.submissions_list`` annotates them)."""
        if self.approval == self.Approval.REJECTED:
            return self.State.REJECTED
        if self.approval == self.Approval.PENDING:
            waiting = self.batch.agent.smoke_state == Agent.Smoke.PENDING
            return self.State.UPLOADED if waiting else self.State.SMOKE_TESTED
        if runs and ended == runs:
            return self.State.DONE
        if queued == runs:
            return self.State.APPROVED
        return self.State.RUNNING

    @property
    def state(self) -> str:
        """``state_of`` with the counts ``selectors.submissions_list`` annotates (counted here when absent)."""
        if not hasattr(self, "runs_total"):
            counts = self.batch.runs.aggregate(
                total=models.Count("pk"),
                queued=models.Count("pk", filter=models.Q(status=Run.Status.QUEUED)),
                ended=models.Count("pk", filter=models.Q(status__in=Run.ENDED)),
            )
            self.runs_total, self.runs_queued, self.runs_ended = counts["total"], counts["queued"], counts["ended"]
        return self.state_of(runs=self.runs_total, queued=self.runs_queued, ended=self.runs_ended)

    def get_state_display(self) -> str:
        return self.State(self.state).label


class RunQuerySet(models.QuerySet):
    """Which runs: ``Run.objects.trials().counted().verified()`` reads as the rankings' rule. Code filters runs with
    these methods only. Where an aggregate counts a group of runs, it uses the condition the method filters by
    (``Run.COUNTED``, ``Run.INFRASTRUCTURE_FAILURE``, ``Run.MLAGENTBENCH_COUNTED``, or a status in ``Run.ENDED``)."""

    def trials(self) -> RunQuerySet:
        """Benchmark runs started afresh: not a validation run (the task's baseline), not a fork (it goes on from
        another run's step: a re-run of that step, never one more trial)."""
        return self.filter(purpose=Run.Purpose.BENCHMARK, forked_from__isnull=True, fork_step__isnull=True)

    def counted(self) -> RunQuerySet:
        """Ended in a way rankings count (``Run.COUNTED``): finished, failed by the agent or at a limit."""
        return self.filter(Run.COUNTED)

    def infrastructure_failures(self) -> RunQuerySet:
        """Ended by the platform's fault (``Run.INFRASTRUCTURE_FAILURE``)."""
        return self.filter(Run.INFRASTRUCTURE_FAILURE)

    def read_by_rankings(self) -> RunQuerySet:
        """Counted, or ended by the platform's fault: what a ranking reads (it shows the failures apart)."""
        return self.filter(Run.COUNTED | Run.INFRASTRUCTURE_FAILURE)

    def verified(self) -> RunQuerySet:
        """Executed and scored by the platform."""
        return self.filter(origin=Run.Origin.VERIFIED)

    def self_reported(self) -> RunQuerySet:
        """Imported from logs made elsewhere."""
        return self.exclude(origin=Run.Origin.VERIFIED)

    def judged(self) -> RunQuerySet:
        """Verified, or self-reported and scored here: a log's run counts once its final workspace has a score (an
        upload's run waits for it; a log that brought no workspace, such as an Inspect log's, never has one)."""
        scored = models.Q(score_pending_since__isnull=True, final_score__isnull=False)
        return self.filter(models.Q(origin=Run.Origin.VERIFIED) | scored)

    def ended(self) -> RunQuerySet:
        """Will not change status again (``Run.ENDED``)."""
        return self.filter(status__in=Run.ENDED)

    def live(self) -> RunQuerySet:
        """Not ended yet (``Run.LIVE``): queued, or on a worker."""
        return self.filter(status__in=Run.LIVE)

    def on_worker(self) -> RunQuerySet:
        """Held by a worker, which sends heartbeats (``Run.ON_WORKER``): what the reaper watches."""
        return self.filter(status__in=Run.ON_WORKER)


class Run(models.Model):
    """One agent on one task version, from the request to its score.

        queued ──claim──> preparing ──> running ──> evaluating ──> finished
          │                  │             │             │
          └── cancelled      └─────────────┴─────────────┴──> failed | cancelled | timed_out
          ^                                │
          └── the reaper (stale heartbeat, attempts left) or a hand-back (the worker is stopping)

    ``finished`` means the run ended normally and was scored; whether it beat the baseline is the separate
    ``succeeded`` (the paper's success). Every change of status is a conditional UPDATE of this row, on its status
    and, from the claim on, on its ``attempt`` (each claim adds one): zero rows updated means someone else owns the
    run, and the writer stops without writing (``runner.execution``). Nothing here or in a signal changes it."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        PREPARING = "preparing", "Preparing"
        RUNNING = "running", "Running"
        EVALUATING = "evaluating", "Evaluating"
        FINISHED = "finished", "Finished"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        TIMED_OUT = "timed_out", "Timed out"

    class FailureKind(models.TextChoices):
        AGENT = "agent", "Agent"
        INFRASTRUCTURE = "infrastructure", "Infrastructure"
        LIMIT = "limit", "Limit"
        TASK = "task", "Task"

    class Purpose(models.TextChoices):
        BENCHMARK = "benchmark", "Benchmark"
        VALIDATION = "validation", "Task validation"
        # A re-run of recorded runs' exact settings (``Batch.plan``; ``leaderboard.reproductions``): it checks a
        # published number and is never counted in it (trials are benchmark runs only).
        REPRODUCTION = "reproduction", "Reproduction"

    class Origin(models.TextChoices):
        # Stored as "executed" and "imported", shown as what they mean to a reader.
        VERIFIED = "executed", "Verified (executed here)"
        SELF_REPORTED = "imported", "Self-reported (imported log)"

    class Review(models.TextChoices):
        """A verified trial whose score is beyond its task's ceiling (the best an honest method reaches) is held:
        rankings count it only once a reviewer cleared it."""

        NONE = "", "Not held"
        HELD = "held", "Held for review"
        CLEARED = "cleared", "Cleared by a reviewer"
        REJECTED = "rejected", "Rejected by a reviewer"

    #: Not held for review, nor rejected by a reviewer: what every ranking's condition includes.
    NOT_HELD = ~models.Q(review__in=(Review.HELD, Review.REJECTED))

    #: Statuses (filter with ``Run.objects.on_worker()``, ``.live()``, ``.ended()``; ask a run ``is_live``,
    #: ``has_ended``): held by a worker; not ended yet; ended.
    ON_WORKER = (Status.PREPARING, Status.RUNNING, Status.EVALUATING)
    LIVE = (Status.QUEUED, *ON_WORKER)
    ENDED = (Status.FINISHED, Status.FAILED, Status.CANCELLED, Status.TIMED_OUT)
    #: Ended by the platform's fault (a lost worker, the LLM endpoint down): says nothing about the agent.
    INFRASTRUCTURE_FAILURE = models.Q(status__in=ENDED, failure_kind=FailureKind.INFRASTRUCTURE)
    #: What rankings count of the trials: finished, failed by the agent, or ended at a limit (the step limit, the
    #: token or cost budget, or timed out); a cancelled run says nothing about the agent. Every failure names its
    #: kind; one that did not would count against the agent.
    COUNTED = (
        models.Q(status__in=(Status.FINISHED, Status.FAILED, Status.TIMED_OUT))
        & ~models.Q(failure_kind__in=(FailureKind.INFRASTRUCTURE, FailureKind.TASK))
        & NOT_HELD
    )
    #: How the run's error begins when it took its last allowed step (``Conversation.steps_left``), and when the
    #: agent's process ended by itself, cleanly, without a Final Answer (``Conversation.converse``).
    STEP_LIMIT_ERROR = "reached the step limit of "
    CLEAN_EXIT_ERROR = "the agent process exited (code 0) "
    #: How a timed-out run's error ends when the time ran out while a script ran (``endings.OutOfTime``).
    INSIDE_SCRIPT = " while a script ran"
    #: What MLAgentBench's tables count (its plot.py): runs that ended without an error of theirs, finished or stopped
    #: by the agent itself or at the step limit, or out of time inside Execute Script (there the action's error, then
    #: a normal end); not those it writes an error.txt for (the time limit between steps, model errors such as a
    #: budget or a prompt too long, an agent that crashed) nor those that never ended (infrastructure).
    MLAGENTBENCH_COUNTED = (
        models.Q(status=Status.FINISHED)
        | models.Q(status=Status.FAILED, failure_kind=FailureKind.LIMIT, error__startswith=STEP_LIMIT_ERROR)
        | models.Q(status=Status.FAILED, failure_kind=FailureKind.AGENT, error__startswith=CLEAN_EXIT_ERROR)
        | models.Q(status=Status.TIMED_OUT, error__endswith=INSIDE_SCRIPT)
    ) & NOT_HELD

    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="runs")
    task_version = models.ForeignKey(TaskVersion, on_delete=models.PROTECT, related_name="runs")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="runs")
    batch = models.ForeignKey(Batch, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    forked_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks")
    fork_step = models.PositiveIntegerField(null=True, blank=True, help_text="Steps 0..fork_step were copied.")
    model = models.CharField(max_length=200, blank=True)
    fast_model = models.CharField(
        max_length=200, blank=True, help_text="Model of the quick LLM-backed actions; empty: the run's model."
    )
    edit_model = models.CharField(
        max_length=200, blank=True, help_text="Model of Edit Script (AI); empty: the fast model, else the run's model."
    )
    purpose = models.CharField(max_length=16, choices=Purpose.choices, default=Purpose.BENCHMARK)
    origin = models.CharField(
        max_length=16,
        choices=Origin.choices,
        default=Origin.VERIFIED,
        help_text="Executed by the platform (verified), or imported from a log made elsewhere (self-reported: its "
        "steps are as the log says; only the final workspace was scored here).",
    )
    sandbox = models.CharField(max_length=16, blank=True)

    class Queue(models.TextChoices):
        """The kind of work a run is: each kind has a job queue of its own (``runner.jobs.queue_name``; short jobs
        have a third), and a worker that takes a message from a queue claims only a run of that kind."""

        RUNS = "runs", "agent runs"
        GPU = "gpu", "GPU runs"
        DEMO = "demo", "demo runs"

    queue = models.CharField(
        max_length=8,
        choices=Queue.choices,
        default=Queue.RUNS,
        help_text="The job queue the run is sent to: GPU runs when its task asks for a GPU, else the demo's queue for "
        "the runs the first start queues (bench_init), agent runs otherwise.",
    )

    max_steps = models.PositiveIntegerField(default=50)
    max_time_s = models.PositiveIntegerField(default=5 * 3600)
    max_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    max_cost = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    attempt = models.PositiveIntegerField(default=0)
    lost_attempts = models.PositiveSmallIntegerField(
        default=0,
        help_text="Attempts that ended without a clean hand-back: their worker died, or lost the database for longer "
        "than BENCH_DB_RETRY_S. After BENCH_RUN_MAX_ATTEMPTS of them the run fails. A worker that stops cleanly "
        "(a deploy, Ctrl-C) hands its run back without losing an attempt.",
    )
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the queued run was last handed over for execution: sent to the job queue, or kept by the "
        "process that created it (bench_run --inline). Empty while it waits to be sent (the reaper sends it again). "
        "An imported run's: when the job that scores it was last sent.",
    )
    hand_back_requested_at = models.DateTimeField(
        null=True, blank=True, help_text="The worker holding the run is stopping: hand the run back to the queue."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    paused_seconds = models.FloatField(
        default=0,
        help_text="Time the run spent off a worker after it started (a dead or stopping worker, waiting to be "
        "resumed): not counted against its time limit.",
    )
    ending = models.JSONField(
        null=True,
        blank=True,
        help_text="How the conversation with the agent ended, once it has: a new attempt only evaluates.",
    )

    final_score = models.FloatField(null=True, blank=True)
    score_pending_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="An imported run whose final workspace waits to be scored (by a worker's job on its kind of run's "
        "queue, asked for then); empty once scored. Rankings leave it out until then.",
    )
    paired_baseline = models.FloatField(
        null=True, blank=True, help_text="Timed tasks: the baseline measured alongside the final score."
    )
    eval_measurements = models.JSONField(default=dict, blank=True, help_text="Timed tasks: every measurement.")
    improved_any_step = models.BooleanField(
        null=True, blank=True, help_text="Some step's workspace (scored on request) beat the baseline by the threshold."
    )
    improvement = models.FloatField(null=True, blank=True)
    succeeded = models.BooleanField(null=True, blank=True)
    review = models.CharField(max_length=16, choices=Review.choices, blank=True, default=Review.NONE)
    review_reason = models.TextField(blank=True, help_text="Why the run was held: what its reviewer checks.")
    review_note = models.TextField(blank=True, help_text="What the reviewer said when clearing or rejecting it.")
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    final_answer = models.TextField(blank=True)
    failure_kind = models.CharField(max_length=16, choices=FailureKind.choices, blank=True)
    error = models.TextField(blank=True)
    eval_error = models.TextField(blank=True)
    eval_log = models.TextField(
        blank=True, help_text="What a scored evaluation printed (staff only: it can quote the task's hidden files)."
    )
    stderr_tail = models.TextField(blank=True)
    initial_snapshot = models.CharField(max_length=64, blank=True)
    final_snapshot = models.CharField(max_length=64, blank=True)

    steps_count = models.PositiveIntegerField(default=0)
    tokens_in = models.PositiveBigIntegerField(default=0)
    tokens_out = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    #: What the model calls in flight may still spend at most (their worst case, reserved before each call and
    #: settled with the endpoint's reported usage after it): the budgets count it as spent.
    tokens_reserved = models.PositiveBigIntegerField(default=0)
    cost_reserved = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    wall_seconds = models.FloatField(default=0)
    cpu_seconds = models.FloatField(default=0)
    peak_memory_mb = models.FloatField(default=0)
    stored_bytes = models.PositiveBigIntegerField(
        default=0, help_text="What the run added to the blob store on disk (new files only, after deduplication)."
    )

    live_action = models.CharField(max_length=100, blank=True)
    live_output = models.TextField(blank=True)

    #: The order queued runs start in: first queued, first started (a resumed run keeps its place).
    QUEUE_ORDER = ("created_at", "pk")
    #: The order of the lists of runs: newest first, the id breaking ties (runs queued together share a time).
    LIST_ORDER = ("-created_at", "-pk")

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        # One index per ordering and filter of the lists (newest first: ``LIST_ORDER``, scanned backwards) and of the
        # queue (``QUEUE_ORDER``, which also counts a queued run's place), so a page reads its rows, never the table.
        indexes = [
            models.Index(fields=["task", "agent", "status"]),
            models.Index(fields=["status", "created_at", "id"], name="run_queue_order"),
            models.Index(fields=["created_at", "id"], name="run_list_order"),
            models.Index(fields=["task", "created_at", "id"], name="run_task_list_order"),
            models.Index(fields=["agent", "created_at", "id"], name="run_agent_list_order"),
            # The review queue: the held runs, oldest first.
            models.Index(fields=["created_at", "id"], name="run_held", condition=models.Q(review="held")),
        ]

    def __str__(self) -> str:
        return f"run {self.pk}: {self.agent} on {self.task}"

    @property
    def is_live(self) -> bool:
        return self.status in self.LIVE

    @property
    def is_trial(self) -> bool:
        """A benchmark run started afresh (``RunQuerySet.trials``)."""
        return self.purpose == self.Purpose.BENCHMARK and self.forked_from_id is None and self.fork_step is None

    @classmethod
    def queue_for(cls, *, version: TaskVersion, demo: bool = False) -> str:
        """The kind of work a new run of ``version`` is: a GPU run when its task asks for a GPU, else a demo run when
        the platform queued it for its first start (a queue of its own, so that nothing a person asks for waits
        behind it), else an agent run. A validation run too: it runs the starter script to its end, which can take
        as long as an agent's run."""
        if int((version.resources or {}).get("gpus", 0) or 0) > 0:
            return cls.Queue.GPU
        return cls.Queue.DEMO if demo else cls.Queue.RUNS

    def final_workspace_snapshot(self) -> str:
        """The snapshot of the workspace the run left: its final one, else its last step's, else its starting one
        ("" when it has none)."""
        if self.final_snapshot:
            return self.final_snapshot
        last = self.steps.order_by("-index").values_list("snapshot", flat=True).first()
        return last or self.initial_snapshot

    @property
    def elapsed_seconds(self) -> float:
        """The run's wall time so far: measured at its end, counted from its start while it is on a worker (time
        off a worker, ``paused_seconds``, not counted)."""
        if self.status in self.ON_WORKER and self.started_at is not None:
            return max((timezone.now() - self.started_at).total_seconds() - self.paused_seconds, 0.0)
        return self.wall_seconds

    @property
    def has_ended(self) -> bool:
        return self.status in self.ENDED

    @property
    def live_line(self) -> dict[str, str]:
        """Where a live run is, from its status alone (one rule for every page that shows it): a label and what it
        is doing; {} once it has ended."""
        action = self.live_action
        if self.status == self.Status.QUEUED:
            place = getattr(self, "queue_position", None)
            return {"label": "Queued", "text": f"{f'#{place} in the queue: ' if place else ''}waiting for a worker"}
        if self.status == self.Status.PREPARING:
            return {"label": "Preparing", "text": action or "preparing the task and laying out the workspace"}
        if self.status == self.Status.RUNNING:
            return {"label": f"Step {self.steps_count}", "text": action or "waiting for the agent's next action"}
        if self.status == self.Status.EVALUATING:
            return {"label": "Evaluating", "text": action or "scoring the final workspace with the task's hidden eval"}
        return {}

    @property
    def is_verified(self) -> bool:
        """Executed and evaluated by the platform: not imported, and ended by its evaluation (finished or out of
        time, whose workspaces are scored) or with a score; a cancelled or failed run without one is not."""
        evaluated = self.status in (self.Status.FINISHED, self.Status.TIMED_OUT) or self.final_score is not None
        return self.origin == self.Origin.VERIFIED and self.has_ended and evaluated

    @property
    def is_self_reported(self) -> bool:
        return self.origin == self.Origin.SELF_REPORTED

    @property
    def eval_error_summary(self) -> str:
        """What the public sees of an evaluation error: its last line (the full log can quote hidden eval code)."""
        return eval_error_public(self.eval_error)

    @property
    def tokens_total(self) -> int:
        return self.tokens_in + self.tokens_out

    @property
    def models_allowed(self) -> dict[str, str]:
        """The models this run may use, by role ("main", "fast", "edit"): set by whoever started the run, never by
        the agent. A run without a model has none, and makes no LLM call."""
        if not self.model:
            return {}
        fast = self.fast_model or self.model
        return {"main": self.model, "fast": fast, "edit": self.edit_model or fast}

    @property
    def limits(self) -> RunLimits:
        return RunLimits(
            max_steps=self.max_steps, max_time_s=self.max_time_s, max_tokens=self.max_tokens, max_cost=self.max_cost
        )


class Step(models.Model):
    """One action of a run, with the agent's entries, the observation and the workspace after it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()
    action = models.CharField(max_length=100)
    action_input = models.JSONField(default=dict, blank=True)
    entries = models.JSONField(default=dict, blank=True)
    observation = models.TextField(blank=True)
    observation_blob = models.CharField(max_length=64, blank=True, help_text="Full observation when cut.")
    is_error = models.BooleanField(default=False)
    started_at = models.DateTimeField()
    duration_s = models.FloatField(default=0)
    tokens_in = models.PositiveBigIntegerField(default=0)
    tokens_out = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    snapshot = models.CharField(max_length=64, blank=True)
    score = models.FloatField(null=True, blank=True)
    low_level = models.JSONField(default=list, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    inherited = models.BooleanField(default=False, help_text="Copied from the run this one was forked from.")
    attempt = models.PositiveIntegerField(default=1, help_text="The run's attempt that took this step.")

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="step_unique_index")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.index} {self.action}"


class LLMCall(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="llm_calls")
    step = models.ForeignKey(Step, null=True, blank=True, on_delete=models.SET_NULL, related_name="llm_calls")
    step_index = models.PositiveIntegerField(help_text="The step this call belongs to (made before it).")
    purpose = models.CharField(max_length=60, blank=True)
    endpoint = models.CharField(max_length=100, blank=True)
    model = models.CharField(max_length=200)
    messages = models.JSONField(default=list)
    tools = models.JSONField(
        default=dict, blank=True, help_text="The functions offered the model: tools and tool_choice ({} for none)."
    )
    completion = models.TextField(blank=True)
    tool_calls = models.JSONField(default=list, blank=True, help_text="The functions the model called.")
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    latency_s = models.FloatField(default=0)
    error = models.TextField(blank=True)
    recorded_bytes = models.PositiveIntegerField(
        default=0, help_text="What the row holds: prompt, functions offered, completion, calls, error."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "created_at"]
        verbose_name = "LLM call"
        indexes = [models.Index(fields=["run", "step_index"], name="llmcall_run_step")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.step_index} {self.model}"


class ReviewTag(models.Model):
    """A failure mode seen in a run or one of its steps: set by a reviewer (with a comment), or automatically
    where the trace itself shows it (``author`` empty; ``runner/review.py`` writes those when a run ends)."""

    class Kind(models.TextChoices):
        HALLUCINATED = "hallucinated", "Hallucinated result"
        BAD_PLAN = "bad_plan", "Bad plan"
        DEBUGGING_LOOP = "debugging_loop", "Debugging loop"
        GAVE_UP = "gave_up", "Gave up early"
        ENVIRONMENT = "environment", "Environment error"
        OTHER = "other", "Other"
        SCRIPT_CRASHED = "script_crashed", "Script crashed"
        OUT_OF_MEMORY = "out_of_memory", "Out of memory"
        MALFORMED_RESPONSE = "malformed_response", "Malformed agent response"
        PROMPT_TOO_LONG = "prompt_too_long", "Prompt too long"
        LIMIT_REACHED = "limit_reached", "Limit reached"
        REPEATED_ACTION = "repeated_action", "Repeated identical action"

    #: What reviewers choose from; the others are only ever set from the trace.
    REVIEWED = (
        Kind.HALLUCINATED, Kind.BAD_PLAN, Kind.DEBUGGING_LOOP, Kind.GAVE_UP, Kind.ENVIRONMENT, Kind.OTHER,
    )  # fmt: skip

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="review_tags")
    step = models.ForeignKey(Step, null=True, blank=True, on_delete=models.CASCADE, related_name="review_tags")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, help_text="Empty: automatic."
    )
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [
            models.Index(fields=["run", "kind"], name="reviewtag_run_kind"),
            models.Index(fields=["kind", "run"], name="reviewtag_kind_run"),
        ]

    def __str__(self) -> str:
        where = f" step {self.step.index}" if self.step_id else ""
        return f"{self.get_kind_display()} on run {self.run_id}{where}"

    @property
    def automatic(self) -> bool:
        return self.author_id is None


class ModelEndpoint(models.Model):
    """An OpenAI-compatible model endpoint. Runs name it by ``name``; the API key never enters the database:
    only the name of the environment variable that holds it."""

    name = models.SlugField(max_length=100, unique=True, help_text="What runs call this model (--model NAME).")
    base_url = models.URLField(max_length=300, help_text="OpenAI-compatible base URL, e.g. https://host/v1")
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        help_text="Name of the environment variable (on the workers) that holds the API key; blank for none.",
    )
    model_id = models.CharField(max_length=200, help_text="The model id sent to the endpoint.")
    price_input_per_mtok = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    price_output_per_mtok = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    timeout_s = models.FloatField(
        default=120,
        help_text="Seconds a call may take (plus the answer's max_tokens at output_tokens_per_s, when set).",
    )
    output_tokens_per_s = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.001)],
        help_text="The slowest generation speed to expect, in tokens per second: a call then waits timeout_s plus "
        "its max_tokens at this speed (a slow local server needs minutes for a 2,000-token answer). Blank: "
        "timeout_s for every call.",
    )
    max_concurrency = models.PositiveIntegerField(default=4)
    default_max_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="The answer's tokens when a request does not say. Blank: what MLAgentBench sends this model (500 "
        "through the OpenAI API; 2,000 for Claude, Gemini, Hugging Face and organization/model names).",
    )
    default_temperature = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0), MaxValueValidator(2)],
        help_text="The temperature when a request does not say. Blank: what MLAgentBench sends this model (0.2 "
        "through the OpenAI API, 0.5 for the others).",
    )
    is_enabled = models.BooleanField(default=True)
    last_check_at = models.DateTimeField(null=True, blank=True)
    last_check_ok = models.BooleanField(null=True, blank=True)
    last_check_message = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def completion_defaults(self) -> dict:
        """The max_tokens and temperature of a request that does not give them: the endpoint's own, else what
        MLAgentBench's ``complete_text`` sends for the model id (its OpenAI path unless the name is Claude's,
        Gemini's, Hugging Face's or an organization/model one)."""
        other_path = self.model_id.startswith(("claude", "gemini", "huggingface")) or "/" in self.model_id
        tokens, temperature = (2000, 0.5) if other_path else (500, 0.2)
        return {
            "max_tokens": self.default_max_tokens or tokens,
            "temperature": temperature if self.default_temperature is None else self.default_temperature,
        }


class LLMLease(models.Model):
    """A slot of an endpoint's concurrency taken by one call in flight (across all workers), on a database without
    advisory locks (SQLite): on PostgreSQL a slot is a lock (``runner.llm.gateway._slot_take``)."""

    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.CASCADE, related_name="leases")
    run = models.ForeignKey(Run, null=True, on_delete=models.CASCADE)
    acquired_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.endpoint} lease {self.pk}"


class Worker(models.Model):
    """A Celery worker process, as it last reported itself: a row survives the worker's death, so staff see when a
    worker was last heard of (``runner.execution.workers``); its runs are the live runs whose ``Run.worker`` is its
    name."""

    name = models.CharField(max_length=200, unique=True, help_text="Celery's node name, as runs record it.")
    queues = models.JSONField(default=list, blank=True, help_text="The job queues it serves.")
    pid = models.PositiveIntegerField(null=True, blank=True)
    concurrency = models.PositiveIntegerField(default=1)
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True, help_text="When it stopped cleanly (warm shutdown).")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
