from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.exceptions import Throttled, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from core.schema import errors
from runner.selectors import runs_visible_to
from runner.services import RunRequestError
from runner.throttles import RunRequestThrottle

from .exports import leaderboard_row_export, reproduction_export
from .links import entrant_parse
from .query import BoardFilters, RankingOptions, board_query_parse
from .reproductions import reproduction_comparison, reproduction_comparisons, reproductions_visible
from .selectors import leaderboard_matrix
from .services import reproduction_of_row, reproduction_of_run

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
        "any_step_successes": serializers.IntegerField(
            help_text="counted runs where some scored step (the final one included) beat the baseline by the threshold"
        ),
        "any_step_rate": serializers.FloatField(
            allow_null=True, help_text="success at any point, as MLAgentBench's plot.py reports it: of the runs"
        ),
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
        "reproduction": inline_serializer(
            "LeaderboardRowReproduction",
            {"id": serializers.IntegerField(), "verdict": serializers.CharField(), "exact": serializers.BooleanField()},
            allow_null=True,
            help_text="the row's latest reproduction: its verdict (holds, differs, too few runs to say) or where it is",
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


class ReproductionRequestSerializer(serializers.Serializer):
    row = serializers.CharField(required=False, max_length=500, help_text="agent@version or agent@version/model")
    versions = serializers.ChoiceField(
        ["current", "all"], default="current", help_text="the row's runs of current task versions only (default)"
    )
    run = serializers.IntegerField(required=False, min_value=1, help_text="reproduce one run instead of a row")

    def validate(self, attrs: dict) -> dict:
        if ("row" in attrs) == ("run" in attrs):
            raise serializers.ValidationError("name a row (agent@version[/model]) or a run, one of the two")
        return attrs


_SIDE = serializers.DictField(allow_null=True, help_text="runs, successes, success_rate, intervals, means")
_DIFFERENCE = serializers.DictField(
    allow_null=True, help_text="reproduction minus original: difference, 95% interval, fewest_runs, tasks"
)
REPRODUCTION_FIELDS = {
    "id": serializers.IntegerField(),
    "agent": serializers.CharField(),
    "agent_version": serializers.CharField(),
    "model": serializers.CharField(),
    "run": serializers.IntegerField(allow_null=True, help_text="the run reproduced; null: a row"),
    "batch": serializers.IntegerField(),
    "created_at": serializers.DateTimeField(),
    "exact": serializers.BooleanField(),
    "differences": serializers.ListField(child=serializers.CharField(), help_text="what is not as recorded"),
    "spec": serializers.DictField(help_text="what the original runs recorded"),
    "state": serializers.CharField(),
    "verdict": serializers.CharField(help_text="holds, differs, too few runs to say; or where the batch is"),
    "original": _SIDE,
    "reproduction": _SIDE,
    "difference": _DIFFERENCE,
    "tasks": serializers.ListField(child=serializers.DictField()),
}
REPRODUCTION = inline_serializer("Reproduction", REPRODUCTION_FIELDS)
REPRODUCTIONS = inline_serializer("Reproduction", REPRODUCTION_FIELDS, many=True)


#: At most this many reproductions in the list, newest first.
REPRODUCTIONS_LISTED = 100


@extend_schema(
    methods=["GET"],
    operation_id="reproductions_list",
    responses={200: REPRODUCTIONS, **errors()},
    description="Every reproduction you may see.",
)
@extend_schema(
    methods=["POST"],
    operation_id="reproductions_create",
    request=ReproductionRequestSerializer,
    responses={201: REPRODUCTION, **errors(403, 429)},
    description="Reproduce a leaderboard row or a run (staff; an agent's owner, as a submission staff approve).",
)
@api_view(["GET", "POST"])
def reproductions_api(request: Request) -> Response:
    """Reproductions, newest first, each with its comparison and verdict (docs/reproductions.md); a POST starts one:
    the row or the run's runs again, with what they recorded, or 400 naming what cannot be the same any more."""
    if request.method == "GET":
        shown = list(reproductions_visible(request.user)[:REPRODUCTIONS_LISTED])
        comparisons = reproduction_comparisons(shown)
        return Response([reproduction_export(r, comparisons[r.pk]) for r in shown])
    throttle = RunRequestThrottle()  # a request for runs, counted with the others (BENCH_RUN_REQUEST_RATE)
    if not throttle.allow_request(request, None):
        raise Throttled(wait=throttle.wait())
    asked = ReproductionRequestSerializer(data=request.data)
    asked.is_valid(raise_exception=True)
    data = asked.validated_data
    try:
        if "run" in data:
            run = runs_visible_to(request.user).filter(pk=data["run"]).first()
            if run is None:
                raise RunRequestError(f"no run {data['run']}")
            reproduction = reproduction_of_run(by=request.user, run=run)
        else:
            options = RankingOptions(current_only=data["versions"] != "all")
            reproduction = reproduction_of_row(by=request.user, key=entrant_parse(data["row"]), options=options)
    except (RunRequestError, ValueError) as exc:
        raise ValidationError({"detail": str(exc)}) from None
    body = reproduction_export(reproduction, reproduction_comparison(reproduction))
    return Response(body, status=status.HTTP_201_CREATED)


@extend_schema(operation_id="reproduction_retrieve", responses={200: REPRODUCTION, **errors(404)})
@api_view(["GET"])
def reproduction_api(request: Request, pk: int) -> Response:
    """One reproduction: what it re-ran, what is not the same, and the comparison with its verdict."""
    reproduction = get_object_or_404(reproductions_visible(request.user), pk=pk)
    return Response(reproduction_export(reproduction, reproduction_comparison(reproduction)))
