from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from bench.schema import errors

from .selectors import leaderboard_rows

ROWS = inline_serializer(
    "LeaderboardRow",
    {
        "agent": serializers.CharField(),
        "agent_version": serializers.CharField(),
        "model": serializers.CharField(),
        "tasks": serializers.IntegerField(),
        "runs": serializers.IntegerField(),
        "successes": serializers.IntegerField(),
        "success_rate": serializers.FloatField(),
        "mean_improvement": serializers.FloatField(allow_null=True),
        "mean_cost": serializers.FloatField(allow_null=True),
        "mean_tokens": serializers.FloatField(allow_null=True),
        "mean_seconds": serializers.FloatField(allow_null=True),
        "mean_steps": serializers.FloatField(allow_null=True),
    },
    many=True,
)


@extend_schema(
    parameters=[OpenApiParameter("versions", str, enum=["current", "all"], description="which task versions count")],
    responses={200: ROWS, **errors()},
)
@api_view(["GET"])
def leaderboard_api(request: Request) -> Response:
    """One row per agent version and model: success rate, mean improvement, cost, tokens, time. A private
    agent's runs count only for its owner and staff."""
    versions = request.query_params.get("versions", "current")
    if versions not in ("current", "all"):
        raise serializers.ValidationError({"versions": [f"expected 'current' or 'all', got {versions[:40]!r}"]})
    rows = leaderboard_rows(viewer=request.user, current_only=versions == "current")
    return Response(
        [
            {
                "agent": r["agent__name"],
                "agent_version": r["agent__version"],
                "model": r["model"],
                **{
                    k: (float(v) if v is not None and k.startswith("mean") else v)
                    for k, v in r.items()
                    if not k.startswith("agent__") and k != "model"
                },
            }
            for r in rows
        ]
    )
