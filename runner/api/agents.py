"""``/api/v1/agents/`` (agents by name with their versions; any signed-in user uploads one) and
``/api/v1/submissions/`` (ask for runs of an agent, see where one's requests are, and, staff, approve or reject
them). Built on the runs API (``runner/api/runs.py``)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from core.pagination import BoundedLimitOffsetPagination
from core.roles import is_staff
from core.schema import errors
from runner.agents.packages import AgentPackageError, agent_upload
from runner.agents.submissions import (
    SubmissionDecided,
    agents_requestable,
    submission_approve,
    submission_create,
    submission_reject,
)
from runner.api.runs import RunRequestSerializer, RunSerializer, queue_unreachable_answer
from runner.jobs import QueueUnreachable
from runner.models import Agent, Submission
from runner.selectors import agent_versions, agents_list, queue_positions_fill, submissions_list
from runner.services import RunRequestError, agent_resolve
from runner.throttles import AgentUploadThrottle, RunRequestThrottle


class SubmissionSerializer(serializers.ModelSerializer):
    id = serializers.IntegerField(source="pk", read_only=True)
    agent = serializers.CharField(source="batch.agent.name")
    agent_version = serializers.CharField(source="batch.agent.version")
    submitter = serializers.CharField(source="batch.created_by.username", help_text="who asked for the runs")
    tasks = serializers.SlugRelatedField(source="batch.tasks", slug_field="slug", many=True, read_only=True)
    repeats = serializers.IntegerField(source="batch.repeats")
    model = serializers.CharField(source="batch.model")
    fast_model = serializers.CharField(source="batch.fast_model")
    edit_model = serializers.CharField(source="batch.edit_model")
    max_steps = serializers.IntegerField(source="batch.max_steps", allow_null=True)
    max_time_s = serializers.IntegerField(source="batch.max_time_s", allow_null=True)
    max_tokens = serializers.IntegerField(source="batch.max_tokens", allow_null=True)
    max_cost = serializers.DecimalField(source="batch.max_cost", max_digits=12, decimal_places=6, allow_null=True)
    state = serializers.ChoiceField(
        choices=Submission.State.choices,
        help_text="uploaded (waiting for the agent's smoke test) / smoke_tested (waiting for approval), "
        "rejected, approved (its runs all queued), running (some started, not all ended), done (all ended)",
    )
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    created_at = serializers.DateTimeField(source="batch.created_at")
    runs = serializers.IntegerField(source="runs_total", help_text="runs written (none before approval)")
    runs_queued = serializers.IntegerField()
    runs_ended = serializers.IntegerField()

    class Meta:
        model = Submission
        fields = [
            "id", "agent", "agent_version", "submitter", "tasks", "repeats", "model", "fast_model", "edit_model",
            "max_steps", "max_time_s", "max_tokens", "max_cost", "approval", "state", "decided_by", "decided_at",
            "rejection_reason", "created_at", "runs", "runs_queued", "runs_ended",
        ]  # fmt: skip


class SubmissionRequestSerializer(RunRequestSerializer):
    """What a request for runs names (as ``POST /api/v1/runs/``); the agent must be the requester's own (staff: any)."""

    def validate_agent(self, value: str) -> Agent:
        try:
            return agent_resolve(value, among=agents_requestable(user=self.context["request"].user))
        except RunRequestError as exc:
            raise serializers.ValidationError(str(exc)) from None


class SubmissionRejectSerializer(serializers.Serializer):
    reason = serializers.CharField(min_length=1, max_length=2000, help_text="why: the submitter reads it")


class SubmissionApproveAnswerSerializer(SubmissionSerializer):
    created_runs = RunSerializer(many=True, help_text="the runs the approval queued")

    class Meta(SubmissionSerializer.Meta):
        fields = [*SubmissionSerializer.Meta.fields, "created_runs"]


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter(
                "approval", str, enum=Submission.Approval.values, description="only submissions with this approval"
            )
        ],
        responses={200: SubmissionSerializer(many=True), **errors(403)},
    ),
    retrieve=extend_schema(responses={200: SubmissionSerializer, **errors(403, 404)}),
)
class SubmissionViewSet(viewsets.GenericViewSet):
    """Requests for runs of an agent (tasks x repeats, models from the platform's enabled endpoints, limits).
    A signed-in user asks for runs of their own agents and sees their requests; staff see all and approve or reject
    them (staff's own are approved at once, anyone's when BENCH_AUTO_APPROVE_SUBMISSIONS is on). Approval queues the
    runs; they are executed and verified like any run."""

    permission_classes = [permissions.IsAuthenticated]
    serializer_class = SubmissionSerializer
    queryset = Submission.objects.none()  # what the schema knows the path by; reads go through the selectors

    def get_throttles(self):
        return [RunRequestThrottle()] if self.action == "create" else []

    def get_queryset(self):
        params = self.request.query_params
        approval = params.get("approval") if self.action == "list" else None
        if "approval" in params and self.action == "list" and approval not in Submission.Approval.values:
            expected = ", ".join(Submission.Approval.values)
            raise serializers.ValidationError({"approval": [f"expected one of {expected}"]})
        return submissions_list(viewer=self.request.user, approval=approval)

    def get_object(self) -> Submission:
        pk = self.kwargs["pk"]
        if not str(pk).isdigit() or int(pk) > 2**63 - 1:
            raise NotFound(f"no submission {pk}")
        found = self.get_queryset().filter(pk=int(pk)).first()
        if found is None:
            raise NotFound(f"no submission {pk}")
        return found

    def list(self, request):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(SubmissionSerializer(page, many=True).data)

    def retrieve(self, request, pk=None):
        return Response(SubmissionSerializer(self.get_object()).data)

    @extend_schema(request=SubmissionRequestSerializer, responses={201: SubmissionSerializer, **errors(403, 429, 503)})
    def create(self, request):
        """Ask for runs: checked at once as the runs would be (400 naming what is wrong); 201 with the submission,
        waiting for approval, or approved with its runs queued (staff, or the auto-approve setting)."""
        asked = SubmissionRequestSerializer(data=request.data, context={"request": request})
        asked.is_valid(raise_exception=True)
        data = asked.validated_data
        try:
            submission, _ = submission_create(submitter=request.user, **RunRequestSerializer.batch_arguments(data))
        except RunRequestError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        except QueueUnreachable as exc:
            return queue_unreachable_answer(exc)
        return Response(SubmissionSerializer(self._fresh(submission)).data, status=status.HTTP_201_CREATED)

    def _fresh(self, submission: Submission) -> Submission:
        return submissions_list(viewer=None).get(pk=submission.pk)

    def _staff_only(self, request) -> None:
        if not is_staff(request.user):
            raise PermissionDenied("only staff approve or reject submissions")

    @extend_schema(request=None, responses={200: SubmissionApproveAnswerSerializer, **errors(403, 404, 409, 503)})
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        """Approve a pending submission (staff): its runs are queued. 409 if it was decided already; 400 if its
        runs cannot be made now (a task retired, an endpoint disabled since), and it stays pending."""
        self._staff_only(request)
        submission = self.get_object()
        try:
            runs = submission_approve(submission=submission, by=request.user)
        except SubmissionDecided as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except RunRequestError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        except QueueUnreachable as exc:
            return queue_unreachable_answer(exc)
        created = RunSerializer(queue_positions_fill(runs), many=True).data
        answer = SubmissionSerializer(self._fresh(submission)).data | {"created_runs": created}
        return Response(answer)

    @extend_schema(request=SubmissionRejectSerializer, responses={200: SubmissionSerializer, **errors(403, 404, 409)})
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        """Reject a pending submission (staff), saying why; it never gets runs. 409 if it was decided already."""
        self._staff_only(request)
        submission = self.get_object()
        given = SubmissionRejectSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            submission_reject(submission=submission, by=request.user, reason=given.validated_data["reason"])
        except SubmissionDecided as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except RunRequestError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(SubmissionSerializer(self._fresh(submission)).data)


class AgentVersionSerializer(serializers.ModelSerializer):
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    smoke_state = serializers.ChoiceField(
        choices=Agent.Smoke.choices,
        help_text="an uploaded package's smoke test: pending (waiting for a worker), passed, failed; empty: none "
        "needed (built in, or imported by staff)",
    )
    smoke_error = serializers.SerializerMethodField(
        help_text="why the smoke test failed, with the agent's stderr tail (to its owner and staff; others: empty)"
    )

    class Meta:
        model = Agent
        fields = [
            "name", "version", "kind", "entrypoint", "description", "uses_llm", "default_model", "owner",
            "visibility", "package_digest", "smoke_state", "smoke_error", "smoke_tested_at", "created_at",
        ]  # fmt: skip

    def get_smoke_error(self, agent: Agent) -> str:
        request = self.context.get("request")
        user = getattr(request, "user", None)
        shown = user is not None and (is_staff(user) or (user.is_authenticated and agent.owner_id == user.pk))
        return agent.smoke_error if shown else ""


class AgentSerializer(serializers.Serializer):
    """An agent: its name, its latest version's owner and description, and every version the reader may see."""

    name = serializers.CharField()
    owner = serializers.CharField(allow_null=True, help_text="the latest version's owner")
    description = serializers.CharField(help_text="the latest version's")
    versions = AgentVersionSerializer(many=True, help_text="newest first")

    @staticmethod
    def grouped(versions: list[Agent]) -> list[dict]:
        """Versions (ordered by name, newest first) as one entry per name."""
        agents: dict[str, dict] = {}
        for version in versions:
            entry = agents.setdefault(
                version.name,
                {
                    "name": version.name,
                    "owner": version.owner.username if version.owner else None,
                    "description": version.description,
                    "versions": [],
                },
            )
            entry["versions"].append(version)
        return list(agents.values())


class AgentUploadSerializer(serializers.Serializer):
    package = serializers.FileField(
        help_text="A zip of the agent's folder: agent.toml (name and version are taken from it) and the entry point."
    )
    description = serializers.CharField(required=False, allow_blank=True, max_length=5000)
    visibility = serializers.ChoiceField(choices=Agent.Visibility.choices, default=Agent.Visibility.PUBLIC)


class AgentUploadAnswerSerializer(AgentVersionSerializer):
    created = serializers.BooleanField(help_text="false: the same files were uploaded before, as this version")

    class Meta(AgentVersionSerializer.Meta):
        fields = [*AgentVersionSerializer.Meta.fields, "created"]


@extend_schema_view(
    list=extend_schema(responses={200: AgentSerializer(many=True), **errors()}),
    retrieve=extend_schema(responses={200: AgentSerializer, **errors(404)}),
)
class AgentViewSet(viewsets.GenericViewSet):
    """Agents by name with their versions; a private agent is listed and found only for its owner and staff.
    Any signed-in user may upload one (POST, multipart)."""

    lookup_field = "name"
    lookup_value_regex = r"[a-z0-9][a-z0-9_-]{0,99}"
    permission_classes = [permissions.IsAuthenticatedOrReadOnly]
    parser_classes = [MultiPartParser]
    pagination_class = BoundedLimitOffsetPagination
    queryset = Agent.objects.none()  # what the schema knows the path by; reads go through the selectors
    serializer_class = AgentSerializer

    def get_throttles(self):
        return [AgentUploadThrottle()] if self.action == "create" else []

    def list(self, request):
        visible = agents_list(viewer=request.user)
        names = self.paginate_queryset(visible.order_by("name").values_list("name", flat=True).distinct())
        agents = AgentSerializer.grouped(list(visible.filter(name__in=names)))
        return self.get_paginated_response(AgentSerializer(agents, many=True, context={"request": request}).data)

    def retrieve(self, request, name=None):
        try:
            versions = agent_versions(viewer=request.user, name=name)
        except Agent.DoesNotExist:
            raise NotFound(f"no agent {name}") from None
        return Response(AgentSerializer(AgentSerializer.grouped(versions)[0], context={"request": request}).data)

    @extend_schema(
        request={"multipart/form-data": AgentUploadSerializer},
        responses={201: AgentUploadAnswerSerializer, 200: AgentUploadAnswerSerializer, **errors(403, 429)},
    )
    def create(self, request):
        """Upload an agent package, as `import_agent` imports one. It is stored and smoke-tested by a worker (the
        agent must answer its first message in the sandbox within BENCH_AGENT_SMOKE_TIMEOUT_S): the answer comes at
        once with `smoke_state` pending; `GET /api/v1/agents/{name}/` shows it passed, or failed with
        `smoke_error` (the agent's stderr tail). No run of it is queued before it passes. A name belongs to whoever
        uploaded it first. 201: a new version (or new files for a version whose smoke test failed); 200: the same
        files were uploaded before (that version, tested again if its test had failed); 400: refused, naming why,
        and nothing kept."""
        upload = AgentUploadSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        data = upload.validated_data
        try:
            agent, created = agent_upload(
                upload=data["package"],
                submitter=request.user,
                visibility=data["visibility"],
                description=data.get("description", ""),
            )
        except AgentPackageError as exc:
            raise serializers.ValidationError({"package": [str(exc)]}) from None
        answer = AgentVersionSerializer(agent, context={"request": request}).data | {"created": created}
        return Response(answer, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
