from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from bench.schema import errors

from .selectors import leaderboard_row_export, leaderboard_rows

ROWS = inline_serializer(
    "LeaderboardRow",
    {
        "agent": serializers.CharField(),
        "agent_version": serializers.CharField(),
        "model": serializers.CharField(),
        "tasks": serializers.IntegerField(),
        "runs": serializers.IntegerField(help_text="runs counted: trials that ended finished, failed or at a limit"),
        "successes": serializers.IntegerField(),
        "infrastructure_failures": serializers.IntegerField(help_text="counted only with infra=include"),
        "scored": serializers.IntegerField(help_text="counted runs with an improvement"),
        "success_rate": serializers.FloatField(allow_null=True),
        "success_interval": serializers.ListField(
            child=serializers.FloatField(), allow_null=True, help_text="95% Wilson score interval"
        ),
        "mean_improvement": serializers.FloatField(allow_null=True),
        "improvement_interval": serializers.ListField(
            child=serializers.FloatField(), allow_null=True, help_text="95% Student t interval of the mean"
        ),
        "mean_cost": serializers.FloatField(allow_null=True),
        "mean_tokens": serializers.FloatField(allow_null=True),
        "mean_seconds": serializers.FloatField(allow_null=True),
        "mean_steps": serializers.FloatField(allow_null=True),
    },
    many=True,
)


@extend_schema(
    parameters=[
        OpenApiParameter("versions", str, enum=["current", "all"], description="which task versions count"),
        OpenApiParameter("infra", str, enum=["include"], description="count infrastructure failures as failed runs"),
    ],
    responses={200: ROWS, **errors()},
)
@api_view(["GET"])
def leaderboard_api(request: Request) -> Response:
    """One row per agent version and model: success rate with its 95% interval, mean improvement with its 95%
    interval, cost, tokens, time, over the runs the leaderboard counts (the page states the rule). A private
    agent's runs count only for its owner and staff."""
    versions = request.query_params.get("versions", "current")
    if versions not in ("current", "all"):
        raise serializers.ValidationError({"versions": [f"expected 'current' or 'all', got {versions[:40]!r}"]})
    infra = request.query_params.get("infra")
    if infra not in (None, "include"):
        raise serializers.ValidationError(
            {"infra": [f"expected 'include' (or no infra parameter), got {infra[:40]!r}"]}
        )
    rows = leaderboard_rows(
        viewer=request.user, current_only=versions == "current", include_infrastructure=infra == "include"
    )
    return Response([leaderboard_row_export(r) for r in rows])
