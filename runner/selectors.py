"""Reads for runs: who may see which, lists and the trace of one run, without N+1 queries.

The access rule lives here and only here: a public agent, its runs and their steps are visible to everyone
(anonymous visitors included); a private agent, its runs and steps only to its owner and to staff. Every page and
API view that lists or shows agents, runs or steps reads through ``agents_visible_filter`` (directly or through
``runs_visible_to``), and answers a hidden run as if it did not exist (404, never 403). Steps are only ever reached
through their run, so a step is visible exactly when its run is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.db.models import (
    Avg,
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce, Length, Now, Substr
from django.utils import timezone

from .actions import ACTIONS
from .models import Agent, LLMCall, ReviewTag, Run, RunQuerySet, Step, Submission, Worker
from .trace import PLAN

# Who is looking: a signed-in user, an anonymous visitor, or None for an operator's management command
# (export_log), which sees everything.
Viewer = AbstractBaseUser | AnonymousUser | None


def agents_visible_filter(viewer: Viewer, *, through: str = "") -> Q:
    """The access rule as a filter on the agent that the lookup path ``through`` leads to: "" on Agent,
    "agent__" on Run, "runs__agent__" on Task."""
    if viewer is None or viewer.is_staff:
        return Q()
    rule = Q(**{f"{through}visibility": Agent.Visibility.PUBLIC})
    if viewer.is_authenticated:
        rule |= Q(**{f"{through}owner": viewer})
    return rule


def runs_visible_to(viewer: Viewer) -> QuerySet[Run]:
    """The runs ``viewer`` may see: those of the agents the access rule shows them."""
    return Run.objects.filter(agents_visible_filter(viewer, through="agent__"))


def agents_list(*, viewer: Viewer) -> QuerySet[Agent]:
    """Every agent version ``viewer`` may see, by name, newest version first (a page groups them by name)."""
    return Agent.objects.filter(agents_visible_filter(viewer)).select_related("owner").order_by("name", "-created_at")


def agent_versions(*, viewer: Viewer, name: str) -> list[Agent]:
    """The versions of agent ``name`` that ``viewer`` may see, newest first; ``Agent.DoesNotExist`` when there is
    none (an agent hidden from the viewer gets the same answer as one that does not exist)."""
    versions = list(agents_list(viewer=viewer).filter(name=name))
    if not versions:
        raise Agent.DoesNotExist(f"no agent {name}")
    return versions


def agent_ranked_counts(*, viewer: Viewer, name: str) -> QuerySet:
    """Per task, agent version and model: the agent's trials that rankings count on the task's current version
    (``trials().counted().verified()``), and how many succeeded; counted by the database."""
    return (
        runs_visible_to(viewer)
        .trials()
        .counted()
        .verified()
        .filter(agent__name=name, task_version=F("task__current_version"))
        .values("task__slug", "task__title", "agent__version", "model")
        .annotate(trials=Count("pk"), succeeded=Count("pk", filter=Q(succeeded=True)))
        .order_by("task__slug", "agent__version", "model")
    )


#: The ``ranking`` filter of the runs list: the runs behind a leaderboard count (``RunQuerySet``'s vocabulary).
RANKINGS: dict[str, Callable[[RunQuerySet], RunQuerySet]] = {
    "counted": lambda runs: runs.trials().counted(),
    "infrastructure": lambda runs: runs.trials().infrastructure_failures(),
    "with-infrastructure": lambda runs: runs.trials().read_by_rankings(),
}


#: The ``origin`` filter of the runs list: runs the platform executed (what rankings count by default) or runs
#: imported from logs made elsewhere.
ORIGINS: dict[str, Callable[[RunQuerySet], RunQuerySet]] = {
    "verified": RunQuerySet.verified,
    "self-reported": RunQuerySet.self_reported,
}


def with_queue_position(runs: QuerySet[Run]) -> QuerySet[Run]:
    """Annotate ``queue_position``: for a queued run, its place among the queued runs of its kind (``Run.queue``:
    a GPU run waits only behind GPU runs, a worker of each kind claiming the first of its own; 1 starts next, whoever
    may see the runs ahead); None for any other run."""
    ahead = (
        Run.objects.filter(status=Run.Status.QUEUED, created_at__lte=OuterRef("created_at"))  # the index's range
        .filter(queue=OuterRef("queue"))
        .filter(Q(created_at__lt=OuterRef("created_at")) | Q(created_at=OuterRef("created_at"), pk__lt=OuterRef("pk")))
        .order_by()
        .values("status")
        .annotate(n=Count("pk"))
        .values("n")
    )
    place = Coalesce(Subquery(ahead, output_field=IntegerField()), Value(0)) + 1
    return runs.annotate(
        queue_position=Case(When(status=Run.Status.QUEUED, then=place), default=None, output_field=IntegerField())
    )


def queue_position(run: Run) -> int | None:
    """``with_queue_position`` for one run."""
    return with_queue_position(Run.objects.filter(pk=run.pk)).values_list("queue_position", flat=True).first()


#: How far back the pace of a queue is read, to say how long a waiting run may wait.
PACE_WINDOW = timedelta(days=1)


def validation_wait(version) -> str:
    """What a task version that is not ready waits for, in words: its validation on a worker now, or its first
    validation run's place in its queue, with how long the runs ahead may take at that queue's recent pace; when
    none is queued or running, when it will be validated (a failed version: "")."""
    runs = Run.objects.filter(task_version=version, purpose=Run.Purpose.VALIDATION)
    if runs.on_worker().exists():
        return "its validation runs now"
    first = runs.live().order_by(*Run.QUEUE_ORDER).first()
    if first is None:
        if version.status != version.Status.PENDING:
            return ""
        repeats = version.validation_repeats
        return f"{repeats} run{'s' if repeats != 1 else ''} of its baseline measure it before the first run asked of it"
    ahead = (queue_position(first) or 1) - 1
    said = f"its validation waits for a worker of the {Run.Queue(first.queue).label}: {ahead} run"
    said += f"{'' if ahead == 1 else 's'} ahead of it"
    seconds, lanes = queue_wait_estimate(first) if ahead else (None, 1)
    if seconds is not None:
        over = f" over {lanes} runs at a time" if lanes > 1 else ""
        said += f", about {max(1, round(seconds / 60))} min by their tasks' run times so far{over}"
    return said


def queue_wait_estimate(run: Run) -> tuple[float | None, int]:
    """How long the runs queued ahead of ``run`` may take, in seconds (None when nothing tells), and how many runs
    at a time the live workers of its queue execute. Each run ahead counts its task version's mean time over its
    ended runs, or else its queue's over the last day (``PACE_WINDOW``): a slow task's runs count as slow."""
    from .jobs import queue_name  # the jobs module imports the models only; kept out of the import-time graph

    ahead = Run.objects.filter(status=Run.Status.QUEUED, queue=run.queue).filter(
        Q(created_at__lt=run.created_at) | Q(created_at=run.created_at, pk__lt=run.pk)
    )
    counts = dict(ahead.order_by().values_list("task_version").annotate(n=Count("pk")))
    timed = Run.objects.ended().filter(wall_seconds__gt=0)
    known = dict(
        timed.filter(task_version__in=counts).order_by().values_list("task_version").annotate(t=Avg("wall_seconds"))
    )
    recent = timed.filter(queue=run.queue, finished_at__gte=timezone.now() - PACE_WINDOW)
    pace = recent.aggregate(pace=Avg("wall_seconds"))["pace"]
    if any(version not in known for version in counts) and pace is None:
        return None, 1
    total = sum(n * (known.get(version) or pace) for version, n in counts.items())
    alive = Now() - timedelta(seconds=settings.BENCH_HEARTBEAT_STALE_S)  # heartbeats are in the database's clock
    serving = Worker.objects.filter(stopped_at__isnull=True, heartbeat_at__gte=alive)
    name = queue_name(run.queue)
    lanes = sum(w.concurrency for w in serving if name in (w.queues or [])) or 1
    return total / lanes, lanes


def queue_positions_fill(runs: list[Run]) -> list[Run]:
    """Set ``queue_position`` on each run of a page (as ``with_queue_position`` annotates it: a queued run's place
    among the queued runs of its kind, None for any other run) with one query for the page, not one count per run:
    the queued runs of each kind numbered in ``Run.QUEUE_ORDER`` up to the page's newest queued run, read from the
    queue's index."""
    for run in runs:
        run.queue_position = None
    queued = {run.pk: run for run in runs if run.status == Run.Status.QUEUED}
    if not queued:
        return runs
    newest = max(run.created_at for run in queued.values())
    ids = ", ".join(["%s"] * len(queued))
    table = connection.ops.quote_name(Run._meta.db_table)
    sql = (
        "SELECT id, place FROM (SELECT id, row_number() OVER (PARTITION BY queue ORDER BY created_at, id) AS place "
        f"FROM {table} WHERE status = %s AND created_at <= %s) AS queued WHERE id IN ({ids})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [Run.Status.QUEUED, newest, *queued])
        for pk, place in cursor.fetchall():
            queued[pk].queue_position = place
    return runs


def runs_list(
    *,
    viewer: Viewer,
    status: str | None = None,
    task: str | None = None,
    agent: str | None = None,
    version: str | None = None,
    model: str | None = None,
    ranking: str | None = None,
    current: bool = False,
    category: str | None = None,
    origin: str | None = None,
    tag: str | None = None,
    batch: int | None = None,
) -> QuerySet[Run]:
    """The runs ``viewer`` may see, newest first (``Run.LIST_ORDER``), filtered by status, task slug, agent name,
    agent ``version``, ``model`` ("" for runs without one; None for any), ``ranking`` (a key of RANKINGS: the runs
    a leaderboard count stands for), ``current`` (only runs of their task's current version), the task's
    ``category``, the run's ``origin`` (a key of ORIGINS), a review ``tag`` kind the run or one of its steps
    has, and the ``batch`` (a submission) it was queued in. A page of it gets its queued runs' places from
    ``queue_positions_fill`` (``runs_page`` does it)."""
    qs = runs_visible_to(viewer).select_related("task", "agent", "task_version").order_by(*Run.LIST_ORDER)
    if status:
        qs = qs.filter(status=status)
    if task:
        qs = qs.filter(task__slug=task)
    if agent:
        qs = qs.filter(agent__name=agent)
    if version:
        qs = qs.filter(agent__version=version)
    if model is not None:
        qs = qs.filter(model=model)
    if ranking:
        qs = RANKINGS[ranking](qs)
    if current:
        qs = qs.filter(task_version=F("task__current_version"))
    if category:
        qs = qs.filter(task__category=category)
    if origin:
        qs = ORIGINS[origin](qs)
    if tag:
        qs = qs.filter(Exists(ReviewTag.objects.filter(run=OuterRef("pk"), kind=tag)))
    if batch is not None:
        qs = qs.filter(batch_id=batch)
    return qs


#: What a row of a runs table (``templates/runner/_run_table.html``) shows: the rest (the run's logs and
#: measurements, its version's problem statement and manifest, the agent's config) is left in the database.
RUN_ROW_FIELDS = (
    "purpose", "origin", "model", "status", "succeeded", "final_score", "score_pending_since", "improvement",
    "steps_count", "wall_seconds", "created_at", "agent__name", "task__slug", "task_version__number",
)  # fmt: skip


def runs_rows(runs: QuerySet[Run]) -> QuerySet[Run]:
    """``runs`` with only what a runs table shows read (``RUN_ROW_FIELDS``)."""
    return runs.only(*RUN_ROW_FIELDS)


class RunsPage(NamedTuple):
    """A page of a list of runs in ``Run.LIST_ORDER``: its runs, and the run to list the next older page from
    (``runs_page(before=...)``) and the next newer one (``after=``), None at either end."""

    runs: list[Run]
    older_from: int | None
    newer_from: int | None


class NoSuchRun(LookupError):
    """A page was asked from a run that the viewer cannot see (or that does not exist: the same answer)."""


def runs_page(
    runs: QuerySet[Run],
    *,
    viewer: Viewer,
    before: int | None = None,
    after: int | None = None,
    size: int = 50,
    skip: int = 0,
) -> RunsPage:
    """One page of ``runs`` (in ``Run.LIST_ORDER``) by keyset: the ``size`` runs that come after run ``before`` in
    the list (older), or just before run ``after`` (newer), or the first ones. Each page reads its rows from the
    list's index whatever its depth (no offset to skip, no count), and its queued runs' places in one more query
    (``queue_positions_fill``). ``skip``: that many runs after ``before`` are left out first (the API's ?offset=).
    ``NoSuchRun`` when the run named is not one ``viewer`` may see."""
    page = _runs_page(runs, viewer=viewer, before=before, after=after, size=size, skip=skip)
    queue_positions_fill(page.runs)
    return page


def _runs_page(
    runs: QuerySet[Run], *, viewer: Viewer, before: int | None, after: int | None, size: int, skip: int = 0
) -> RunsPage:
    anchor_pk = before or after
    if anchor_pk is None:
        rows = list(runs[: size + 1])
        return RunsPage(rows[:size], rows[size - 1].pk if len(rows) > size else None, None)
    anchor = runs_visible_to(viewer).filter(pk=anchor_pk).values_list("created_at", flat=True).first()
    if anchor is None:
        raise NoSuchRun(f"no run {anchor_pk}")
    if before:  # older: (created_at, id) < the anchor's, newest first
        # The plain bound on created_at is the index's range; the id only breaks the tie within it.
        older = runs.filter(created_at__lte=anchor).filter(Q(created_at__lt=anchor) | Q(pk__lt=before))
        rows = list(older[skip : skip + size + 1])
        return RunsPage(rows[:size], rows[size - 1].pk if len(rows) > size else None, rows[0].pk if rows else None)
    newer = runs.filter(created_at__gte=anchor).filter(Q(created_at__gt=anchor) | Q(pk__gt=after))
    rows = list(newer.order_by("created_at", "pk")[: size + 1])[::-1]  # the oldest of the newer ones, newest first
    return RunsPage(rows[-size:], rows[-1].pk if rows else None, rows[-size].pk if len(rows) > size else None)


def run_detail(*, viewer: Viewer, pk: int) -> Run:
    """One run; ``Run.DoesNotExist`` when there is none or ``viewer`` may not see it (the same answer, so a
    hidden run's existence does not leak)."""
    runs = with_queue_position(runs_visible_to(viewer))
    return runs.select_related("task", "agent", "task_version", "batch").get(pk=pk)


def run_steps(*, run: Run) -> QuerySet[Step]:
    """The steps of a run already read through the access rule."""
    return Step.objects.filter(run=run).order_by("index").prefetch_related("llm_calls")


# Steps the run page shows at first, and per "earlier steps" page. Its first paint is about this many cards (each
# ~4 kB on benchmarks/trace_page.py's trace, two thirds of it the text a reader opens the card for), to be kept
# under 200 kB: 40 leaves a card room to grow by a sixth.
TRACE_PAGE_STEPS = 40
OBSERVATION_PREVIEW_CHARS = 2_000  # the start of a longer observation is shown; the rest loads when opened


def _steps_shown(run: Run) -> QuerySet[Step]:
    """A run's steps as the trace shows them: the observation cut to its start (``observation_preview``, with
    ``observation_chars``) and the LLM calls counted (``llm_calls_count``), not loaded."""
    calls = LLMCall.objects.filter(step=OuterRef("pk")).order_by().values("step").annotate(n=Count("*")).values("n")
    return (
        Step.objects.filter(run=run)
        .defer("observation")
        .annotate(
            observation_preview=Substr("observation", 1, OBSERVATION_PREVIEW_CHARS),
            observation_chars=Length("observation"),
            llm_calls_count=Coalesce(Subquery(calls, output_field=IntegerField()), 0),
        )
    )


def run_steps_window(
    *, run: Run, before: int | None = None, after: int | None = None, limit: int = TRACE_PAGE_STEPS
) -> tuple[list[Step], Step | None]:
    """Up to ``limit`` steps of a run in index order, and the step just before them (None when they start the
    run: the trace compares the first of them with it). By default the last steps; with ``before``, the last
    ones before that index (an earlier page); with ``after``, the first ones after it (what a live poll adds).
    One query, whatever the run's length."""
    shown = _steps_shown(run)
    if after is not None:
        rows = list(shown.filter(index__gte=after).order_by("index")[: limit + 1])
        if rows and rows[0].index == after:
            return rows[1:], rows[0]
        return rows[:limit], None
    if before is not None:
        shown = shown.filter(index__lt=before)
    rows = list(shown.order_by("-index")[: limit + 1])[::-1]
    if len(rows) > limit:
        return rows[1:], rows[0]
    return rows, None


@dataclass(frozen=True)
class StepFilter:
    """Which steps of a trace to show: those whose entries, action input or observation contain ``text`` (any
    case), only errors, only one action. Parsed from the run page's query string (``?q=``, ``?errors=1``,
    ``?action=``); the empty filter shows every step."""

    text: str = ""
    errors: bool = False
    action: str = ""

    TEXT_MAX = 200

    @classmethod
    def from_query(cls, query) -> StepFilter:
        action = query.get("action", "").strip()
        return cls(
            text=" ".join(query.get("q", "").split())[: cls.TEXT_MAX],
            errors=query.get("errors") == "1",
            action=action[: cls.TEXT_MAX],
        )

    def __bool__(self) -> bool:
        return bool(self.text or self.errors or self.action)

    def apply(self, steps: QuerySet[Step]) -> QuerySet[Step]:
        if self.errors:
            steps = steps.filter(is_error=True)
        if self.action:
            steps = steps.filter(action=self.action)
        if self.text:
            steps = steps.filter(
                Q(observation__icontains=self.text)
                | Q(entries__icontains=self.text)
                | Q(action_input__icontains=self.text)
            )
        return steps

    @property
    def query(self) -> str:
        """The filter as query-string pairs to append to a URL that already has one ("&q=..."), or ""."""
        pairs = {"q": self.text, "errors": "1" if self.errors else "", "action": self.action}
        encoded = urlencode({k: v for k, v in pairs.items() if v})
        return "&" + encoded if encoded else ""


def run_steps_matching(
    *, run: Run, where: StepFilter, before: int | None = None, after: int | None = None, limit: int = TRACE_PAGE_STEPS
) -> tuple[list[Step], dict[int, Step], bool]:
    """The steps of a run that ``where`` matches, a page of them as ``run_steps_window`` pages the whole trace
    (the last ones, those before ``before``, those after ``after``); the step just before each of them in the run
    (by index: a card compares its step with the one before it, matching or not); and whether matching steps
    come before the page. Two queries, whatever the run's length."""
    shown = where.apply(_steps_shown(run))
    if after is not None:
        rows = list(shown.filter(index__gt=after).order_by("index")[:limit])
        earlier = False
    else:
        if before is not None:
            shown = shown.filter(index__lt=before)
        rows = list(shown.order_by("-index")[: limit + 1])[::-1]
        earlier = len(rows) > limit
        rows = rows[1:] if earlier else rows
    wanted = [step.index - 1 for step in rows if step.index > 0]
    predecessors = {step.index: step for step in _steps_shown(run).filter(index__in=wanted)} if wanted else {}
    return rows, predecessors, earlier


COMPARE_MAX = 4  # runs side by side on the comparison page
COMPARE_STEPS = 50  # step indexes per page of the comparison


class CompareError(ValueError):
    """The runs asked for cannot be compared; the message says why."""


def runs_compared(*, viewer: Viewer, ids: list[int]) -> list[Run]:
    """The runs to compare, in the order asked for: visible to ``viewer``, at most COMPARE_MAX, all of one task.
    A run that does not exist or is hidden is named as not found (the same answer for both)."""
    ids = list(dict.fromkeys(ids))
    if len(ids) > COMPARE_MAX:
        raise CompareError(f"at most {COMPARE_MAX} runs can be compared; {len(ids)} were asked for")
    found = runs_visible_to(viewer).select_related("task", "agent", "task_version").in_bulk(ids)
    missing = [str(pk) for pk in ids if pk not in found]
    if missing:
        raise CompareError(f"no run {', '.join(missing)}")
    runs = [found[pk] for pk in ids]
    tasks = {run.task.slug for run in runs}
    if len(tasks) > 1:
        raise CompareError(f"runs of one task can be compared, not of several ({', '.join(sorted(tasks))})")
    return runs


def runs_of_same_task(*, viewer: Viewer, run: Run, limit: int = 20) -> list[Run]:
    """Other runs of ``run``'s task that ``viewer`` may see, newest first: what it can be compared with."""
    others = runs_visible_to(viewer).filter(task_id=run.task_id).exclude(pk=run.pk).select_related("agent")
    return list(others.order_by(*Run.LIST_ORDER)[:limit])


def compared_steps(*, runs: list[Run], start: int, count: int = COMPARE_STEPS) -> list[dict]:
    """Step indexes ``start`` .. ``start + count - 1`` of each run, aligned by index: one row per index, each
    with the step of every run at that index (None where a run had no such step). One query."""
    rows = (
        Step.objects.filter(run__in=runs, index__gte=start, index__lt=start + count)
        .only("run_id", "index", "action", "action_input", "entries", "is_error", "score")
        .order_by("index")
    )
    by_index: dict[int, dict[int, Step]] = {}
    for step in rows:
        by_index.setdefault(step.index, {})[step.run_id] = step
    return [{"index": i, "steps": [by_index[i].get(run.pk) for run in runs]} for i in sorted(by_index)]


def runs_step_scores(*, runs: list[Run]) -> dict[int, list[dict]]:
    """The scored steps of each run (index and score), for the overlaid score chart. One query."""
    scores: dict[int, list[dict]] = {run.pk: [] for run in runs}
    rows = Step.objects.filter(run__in=runs, score__isnull=False).order_by("index")
    for row in rows.values("run_id", "index", "score"):
        scores[row["run_id"]].append({"index": row["index"], "score": row["score"]})
    return scores


def run_review_tags(*, run: Run, indexes: list[int]) -> tuple[list[ReviewTag], dict[int, list[ReviewTag]]]:
    """The run's own review tags, and those of its steps at ``indexes`` (by index). One query."""
    tags = ReviewTag.objects.filter(Q(step__isnull=True) | Q(step__index__in=indexes), run=run)
    own, by_step = [], {}
    for tag in tags.select_related("step", "author"):
        if tag.step_id is None:
            own.append(tag)
        else:
            by_step.setdefault(tag.step.index, []).append(tag)
    return own, by_step


def run_plan_before(*, run: Run, index: int) -> str | None:
    """The research plan the agent last wrote before step ``index`` (None if it wrote none)."""
    plans = Step.objects.filter(run=run, index__lt=index, entries__has_key=PLAN).order_by("-index")
    return plans.annotate(plan=KeyTextTransform(PLAN, "entries")).values_list("plan", flat=True).first()


def run_step_scores(*, run: Run) -> list[dict]:
    """The index and score of each scored step, for the score chart."""
    return list(Step.objects.filter(run=run, score__isnull=False).order_by("index").values("index", "score"))


def step_llm_calls(*, step: Step) -> QuerySet[LLMCall]:
    """The LLM calls made for one step, prompts and completions included."""
    return step.llm_calls.order_by("pk")


def run_trace_json(*, run: Run) -> dict:
    """The run's trace in MLAgentBench's trace.json shape (steps, low_level_steps, action_infos,
    task_description), with each step's agent entries added under "entries" (which MLAgentBench's reader
    ignores). A step's timestamp is when it ended, as MLAgentBench records it; a low-level step's is its own when
    it was imported with one, else its step's."""
    steps, low_level = [], []
    for step in run_steps(run=run):
        timestamp = (step.started_at.timestamp() + step.duration_s) if step.started_at else None
        steps.append(
            {
                "action": {"name": step.action, "args": step.action_input},
                "observation": step.observation,
                "timestamp": timestamp,
                "entries": step.entries,
            }
        )
        for low in step.low_level:
            low_level.append(
                {
                    "action": {"name": low.get("action"), "args": low.get("input", {})},
                    "observation": low.get("observation", ""),
                    "timestamp": low.get("timestamp", timestamp),
                }
            )
    return {
        "steps": steps,
        "low_level_steps": low_level,
        "action_infos": {
            spec.name: spec.as_dict() | {"function": spec.name.lower().replace(" ", "_")} for spec in ACTIONS
        },
        "task_description": run.task_version.research_problem,
    }


def submissions_list(*, viewer: Viewer, approval: str | None = None) -> QuerySet[Submission]:
    """The submissions ``viewer`` may see, newest first: staff (and an operator's command) all, a submitter those
    they asked for and those of their agents, a visitor none. Each carries the counts its ``state`` is read from
    (runs, queued, ended), counted by the database."""
    submissions = Submission.objects.all()
    if viewer is not None and not viewer.is_staff:
        if not viewer.is_authenticated:
            return submissions.none()
        submissions = submissions.filter(Q(batch__created_by=viewer) | Q(batch__agent__owner=viewer))
    if approval is not None:
        submissions = submissions.filter(approval=approval)
    return (
        submissions.select_related("batch__agent", "batch__created_by", "decided_by")
        .prefetch_related("batch__tasks")
        .annotate(
            runs_total=Count("batch__runs"),
            runs_queued=Count("batch__runs", filter=Q(batch__runs__status=Run.Status.QUEUED)),
            runs_ended=Count("batch__runs", filter=Q(batch__runs__status__in=Run.ENDED)),
        )
        .order_by("-batch__created_at", "-pk")
    )


def stored_by(owner_id: int | None) -> int:
    """The bytes on disk the runs of ``owner_id``'s agents added to the blob store (0 for agents of nobody's)."""
    if owner_id is None:
        return 0
    return Run.objects.filter(agent__owner_id=owner_id).aggregate(total=Sum("stored_bytes"))["total"] or 0


def storage_refusal(*, owner_id: int | None, run_bytes: int = 0, adding: int = 0) -> str:
    """Why a run that has stored ``run_bytes`` may not store ``adding`` bytes more: past its own limit
    (``BENCH_RUN_MAX_STORED_MB``) or past what the runs of its agent's owner may store together
    (``BENCH_USER_MAX_STORED_MB``); "" when it may. ``adding`` counts in the owner's total too: pass what is not
    counted in a run's ``stored_bytes`` yet."""
    run_limit = settings.BENCH_RUN_MAX_STORED_MB << 20
    if run_limit and run_bytes + adding > run_limit:
        return (
            f"the run stored {mb(run_bytes + adding)} of new files, more than a run may store "
            f"({settings.BENCH_RUN_MAX_STORED_MB} MB, BENCH_RUN_MAX_STORED_MB)"
        )
    user_limit = settings.BENCH_USER_MAX_STORED_MB << 20
    if user_limit and owner_id is not None:
        total = stored_by(owner_id) + adding
        if total > user_limit:
            return (
                f"the runs of this agent's owner store {mb(total)} of files, more than one submitter's runs may "
                f"store together ({settings.BENCH_USER_MAX_STORED_MB} MB, BENCH_USER_MAX_STORED_MB); deleting "
                "runs frees their space"
            )
    return ""


def mb(size: int) -> str:
    return f"{size / (1 << 20):.1f} MB"
