from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, viewsets

from core.schema import errors

from .models import Task, TaskVersion
from .selectors import tasks_shown


class TaskVersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = TaskVersion
        fields = [
            "number", "digest", "status", "validation_summary", "metric_name", "higher_is_better", "success_threshold",
            "timed", "script_name", "max_steps", "max_time_s", "resources", "data_license", "baseline_score",
            "baseline_scores", "baseline_spread", "baseline_time_s", "reference_score", "validated_at", "created_at",
        ]  # fmt: skip


class TaskSerializer(serializers.ModelSerializer):
    current_version = TaskVersionSerializer(read_only=True)
    research_problem = serializers.CharField(source="current_version.research_problem", read_only=True)
    status = serializers.CharField(read_only=True)

    class Meta:
        model = Task
        fields = ["slug", "title", "category", "source", "is_enabled", "status", "research_problem", "current_version"]


@extend_schema_view(
    list=extend_schema(responses={200: TaskSerializer(many=True), **errors()}),
    retrieve=extend_schema(responses={200: TaskSerializer, **errors(404)}),
)
class TaskViewSet(viewsets.ReadOnlyModelViewSet):
    """The task bank: every enabled task with its current version (what new runs use); one whose version failed
    validation for staff only."""

    serializer_class = TaskSerializer
    lookup_field = "slug"

    def get_queryset(self):
        tasks = Task.objects.select_related("current_version").filter(is_enabled=True)
        return tasks_shown(tasks, viewer=self.request.user).order_by("slug")
