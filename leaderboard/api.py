from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from bench.schema import errors

from .exports import leaderboard_row_export
from .query import BoardFilters, board_query_parse
from .selectors import leaderboard_matrix

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
        "normalised_count": serializers.IntegerField(help_text="counted runs with a normalised score"),
        "mean_normalised": serializers.FloatField(
            allow_null=True,
            help_text="mean normalised score on the tasks with a reference score: 0 = baseline, 1 = reference",
        ),
        "review_tags": serializers.DictField(
            child=serializers.IntegerField(),
            help_text="counted runs per review tag (on the run or one of its steps), the most frequent first",
        ),
    },
    many=True,
)


@extend_schema(
    parameters=BoardFilters.openapi_parameters(),
    responses={200: ROWS, **errors()},
)
@api_view(["GET"])
def leaderboard_api(request: Request) -> Response:
    """One row per agent version and model: success rate with its 95% interval, mean improvement with its 95%
    interval, mean normalised score, cost, tokens, time, over the runs the leaderboard counts (the page states the
    rule), filtered and ordered as the leaderboard page's query string does. A private agent's runs count only for
    its owner and staff."""
    query, problems = board_query_parse(request.query_params, strict=True)
    if problems:
        raise serializers.ValidationError({param: [message] for param, message in problems.items()})
    board = leaderboard_matrix(viewer=request.user, options=query.options(), sort=query.sort)
    return Response([leaderboard_row_export(r) for r in board["rows"]])
