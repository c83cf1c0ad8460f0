"""``/api/v1/runs/``: runs and their steps (read by anyone they are visible to), started by staff (POST), cancelled;
the run serializers the agents and logs APIs build on."""

from decimal import Decimal

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from core.pagination import BeforeOrOffsetPagination, BoundedLimitOffsetPagination
from core.schema import errors
from runner.filters import RunFilters
from runner.jobs import QueueUnreachable
from runner.models import Agent, Run, RunLimits, RunSpec, Step
from runner.selectors import (
    NoSuchRun,
    queue_position,
    queue_positions_fill,
    runs_list,
    runs_page,
)
from runner.services import RunRequestError, agent_resolve, batch_create, run_cancel
from runner.throttles import RunRequestThrottle
from task_bank.models import Task


def queue_unreachable_answer(exc: QueueUnreachable) -> Response:
    """503 for runs written but not sent (they stay queued, sent when the queue is back): the request must not be
    sent again, which would make them twice."""
    return Response(
        {"detail": f"{exc}; do not send the request again", "runs": exc.sent + exc.unsent},
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
    )


class RunSerializer(serializers.ModelSerializer):
    task = serializers.CharField(source="task.slug")
    task_version = serializers.IntegerField(source="task_version.number")
    agent = serializers.CharField(source="agent.name")
    agent_version = serializers.CharField(source="agent.version")
    queue_position = serializers.SerializerMethodField(help_text="A queued run's place in the queue (1 starts next).")
    score_pending = serializers.SerializerMethodField(
        help_text="An imported run whose final workspace waits to be scored: final_score is empty until then."
    )

    class Meta:
        model = Run
        fields = [
            "id", "task", "task_version", "agent", "agent_version", "model", "fast_model", "edit_model", "purpose",
            "status", "failure_kind", "error", "final_score", "improvement", "succeeded", "steps_count", "max_steps",
            "max_time_s", "max_tokens", "max_cost", "tokens_in", "tokens_out", "cost", "wall_seconds", "cpu_seconds",
            "peak_memory_mb", "stored_bytes", "attempt", "sandbox", "batch", "forked_from", "fork_step", "created_at",
            "started_at", "finished_at", "queue_position", "origin", "score_pending",
        ]  # fmt: skip

    def get_score_pending(self, run: Run) -> bool:
        return run.score_pending_since is not None

    def get_queue_position(self, run: Run) -> int | None:
        if hasattr(run, "queue_position"):
            return run.queue_position
        return queue_position(run) if run.status == Run.Status.QUEUED else None


class StepSerializer(serializers.ModelSerializer):
    class Meta:
        model = Step
        fields = [
            "index", "action", "action_input", "entries", "observation", "is_error", "started_at", "duration_s",
            "tokens_in", "tokens_out", "cost", "snapshot", "score", "low_level", "detail", "inherited",
        ]  # fmt: skip


class RunRequestSerializer(serializers.Serializer):
    agent = serializers.CharField(min_length=1, help_text="agent name (latest version) or name@version")
    tasks = serializers.ListField(
        child=serializers.SlugField(), min_length=1, help_text="task slugs; a slug named twice counts once"
    )
    repeats = serializers.IntegerField(
        min_value=1, default=1, help_text="runs per task; tasks x repeats is capped by BENCH_MAX_RUNS_PER_REQUEST"
    )
    model = serializers.CharField(required=False, allow_blank=True, default="")
    fast_model = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="model of the quick LLM-backed actions"
    )
    edit_model = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="model of the two Edit Script (AI) actions"
    )
    max_steps = serializers.IntegerField(required=False, min_value=1, max_value=RunLimits.MOST["max_steps"])
    max_time_s = serializers.IntegerField(required=False, min_value=1, max_value=RunLimits.MOST["max_time_s"])
    max_tokens = serializers.IntegerField(required=False, min_value=1, max_value=RunLimits.MOST["max_tokens"])
    max_cost = serializers.DecimalField(
        required=False, max_digits=12, decimal_places=6, min_value=Decimal(0), max_value=RunLimits.MOST["max_cost"]
    )

    def validate_agent(self, value: str) -> Agent:
        try:
            return agent_resolve(value)
        except RunRequestError as exc:
            raise serializers.ValidationError(str(exc)) from None

    @staticmethod
    def batch_arguments(data: dict) -> dict:
        """The validated request as ``services.batch_create`` and ``submission_create`` take it."""
        limits = RunLimits(**{name: data.get(name) for name in RunLimits.NAMES})
        spec = RunSpec(data["agent"], data["model"], data["fast_model"], data["edit_model"], limits)
        return {"spec": spec, "tasks": data["tasks"], "repeats": data["repeats"]}

    def validate_tasks(self, slugs: list[str]) -> list[Task]:
        tasks = {t.slug: t for t in Task.objects.select_related("current_version").filter(slug__in=slugs)}
        unknown = [s for s in slugs if s not in tasks]
        if unknown:
            valid = ", ".join(sorted(Task.objects.values_list("slug", flat=True)))
            raise serializers.ValidationError(f"unknown task {', '.join(unknown)}; valid tasks: {valid}")
        return [tasks[s] for s in slugs]


class IsStaffOrReadOnly(permissions.BasePermission):
    reads_are_open = True  # the schema says so (core.schema)

    def has_permission(self, request, view) -> bool:
        return request.method in permissions.SAFE_METHODS or bool(request.user and request.user.is_staff)


@extend_schema_view(
    list=extend_schema(
        parameters=RunFilters.openapi_parameters(),
        responses={200: RunSerializer(many=True), **errors(404)},
    ),
    retrieve=extend_schema(responses={200: RunSerializer, **errors(404)}),
)
class RunViewSet(viewsets.ReadOnlyModelViewSet):
    """Runs, newest first; filtered as the runs page filters them (``RunFilters``: ?status=, ?task=, ?agent=,
    ?versions=, ?ranking=, ?origin=, ...); page with ?limit= and ?offset=, or (as fast at any
    depth) ?before=ID, the runs after run ID, which each page's ``next`` link follows. Staff can start and cancel
    runs (people do it on the site's New runs page, /runs/new/). A private agent's runs are listed and found only
    for its owner and staff (to anyone else, a 404)."""

    serializer_class = RunSerializer
    permission_classes = [IsStaffOrReadOnly]
    pagination_class = BeforeOrOffsetPagination

    def get_throttles(self):
        return [RunRequestThrottle()] if self.action == "create" else []

    def get_serializer_class(self):
        """What a POST to the list takes: the browsable API's form shows the request's fields, not a run's."""
        if self.action in ("list", "create") and self.request is not None and self.request.method == "POST":
            return RunRequestSerializer
        return RunSerializer

    def keyset_page(self, queryset, *, before: int, size: int, skip: int = 0) -> tuple[list[Run], int | None]:
        """?before=ID: the runs listed after run ID (older), read from the list's index at any depth, ``skip`` of
        them left out first."""
        try:
            page = runs_page(queryset, viewer=self.request.user, before=before, size=size, skip=skip)
        except NoSuchRun as exc:  # a well-formed id of no run the viewer may see: not found, as the run itself
            raise NotFound(f"?before=: {exc} to list from") from None
        return page.runs, page.older_from

    def paginate_queryset(self, queryset):
        """A page of runs, with its queued runs' places counted once for the page (``queue_positions_fill``)."""
        page = super().paginate_queryset(queryset)
        if self.action == "list" and page and not hasattr(page[0], "queue_position"):  # keyset pages have them
            queue_positions_fill(page)
        return page

    def get_queryset(self):
        if self.action != "list":
            return runs_list(viewer=self.request.user)
        filters, problems = RunFilters.parse(self.request.query_params)
        if problems:
            raise serializers.ValidationError({name: [problem] for name, problem in problems.items()})
        return runs_list(viewer=self.request.user, **RunFilters.selector_arguments(filters))

    @extend_schema(request=RunRequestSerializer, responses={201: RunSerializer(many=True), **errors(403, 429, 503)})
    def create(self, request):
        """Queue runs of an agent on tasks (one per task x repeat), as `bench_run` does."""
        request_data = RunRequestSerializer(data=request.data)
        request_data.is_valid(raise_exception=True)
        data = request_data.validated_data
        try:
            _, runs = batch_create(**RunRequestSerializer.batch_arguments(data), created_by=request.user)
        except RunRequestError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        except QueueUnreachable as exc:
            return queue_unreachable_answer(exc)
        return Response(RunSerializer(runs, many=True).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: RunSerializer, **errors(403, 404, 409)})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Ask the run to stop: a queued run is cancelled at once, a live one within seconds."""
        run = self.get_object()
        if not run_cancel(run=run):
            return Response({"detail": f"run {run.pk} is {run.status}; nothing to cancel"}, status=409)
        run.refresh_from_db()
        return Response(RunSerializer(run).data)

    @extend_schema(responses={200: StepSerializer(many=True), **errors(404)})
    @action(detail=True, methods=["get"], pagination_class=BoundedLimitOffsetPagination)
    def steps(self, request, pk=None):
        """Every step of the run, in order."""
        run = self.get_object()
        page = self.paginate_queryset(Step.objects.filter(run=run).order_by("index"))
        return self.get_paginated_response(StepSerializer(page, many=True).data)
