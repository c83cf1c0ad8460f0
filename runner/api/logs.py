"""``POST /api/v1/logs/``: an MLAgentBench log uploaded as a self-reported run; ``POST /api/v1/logs/inspect/``:
an Inspect AI log as a self-reported run per sample; ``GET
/api/v1/runs/{id}/inspect-log/`` and ``/api/v1/batches/{id}/inspect-log/``: runs as an Inspect AI eval log."""

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.decorators import api_view, parser_classes, permission_classes, throttle_classes
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from core.schema import errors
from runner.api.runs import RunSerializer
from runner.logs.imports import LogImportError, inspect_upload, log_upload
from runner.logs.inspect_export import inspect_log_name
from runner.logs.inspect_read import is_inspect_name
from runner.models import Run
from runner.selectors import runs_visible_to
from runner.throttles import LogUploadThrottle
from runner.views.logs import inspect_log_response


class LogUploadSerializer(serializers.Serializer):
    log = serializers.FileField(
        help_text="An MLAgentBench log as a zip: env_log/trace.json, env_log/traces/step_N_files/, "
        "step_final_files/, overall_time.txt (what export_log writes, or MLAgentBench's own log folder zipped)."
    )
    task = serializers.SlugField(
        required=False,
        max_length=63,
        help_text="The task's slug; default: the one the log names or whose research problem it has.",
    )
    agent = serializers.RegexField(
        r"^[a-z0-9][a-z0-9_-]{0,99}(@[^\s/]{1,40})?$",
        required=False,
        help_text="name or name@version: an agent you own, or a new name (made yours); staff may name any agent.",
    )
    model = serializers.CharField(required=False, max_length=200, allow_blank=True)


@extend_schema(
    request={"multipart/form-data": LogUploadSerializer},
    responses={201: RunSerializer, **errors(403, 429)},
)
@api_view(["POST"])
@permission_classes([permissions.IsAuthenticated])
@throttle_classes([LogUploadThrottle])
@parser_classes([MultiPartParser])
def log_import_api(request):
    """Import a run made elsewhere from its MLAgentBench log (as `import_log` does): a self-reported run, its steps
    as the log says, its final workspace scored here by a worker's job: `score_pending` is true, and `final_score`
    empty, until it is (`GET /api/v1/runs/{id}/`). Rankings leave it out unless asked (`?origin=all`), and until
    scored. A bad log is a 400 naming the problem, and nothing is written."""
    run = _uploaded(request, LogUploadSerializer, log_upload)
    return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)


def _uploaded(request, serializer_class: type[LogUploadSerializer], importer):
    """The request's upload checked by ``serializer_class`` and imported by ``importer`` (``log_upload``,
    ``inspect_upload``) under the requesting user; a log that cannot be imported is a 400 naming why."""
    upload = serializer_class(data=request.data)
    upload.is_valid(raise_exception=True)
    data = upload.validated_data
    try:
        return importer(
            upload=data["log"],
            owner=request.user,
            task_slug=data.get("task"),
            agent_name=data.get("agent"),
            model=data.get("model"),
        )
    except LogImportError as exc:
        raise serializers.ValidationError({"log": [str(exc)]}) from None


class InspectUploadSerializer(LogUploadSerializer):
    log = serializers.FileField(
        help_text="An Inspect AI eval log: a .json file (what `inspect eval --log-format json` and "
        "`GET /api/v1/runs/{id}/inspect-log/` write); a .eval file is refused with how to convert it."
    )

    def validate_log(self, log):
        if not is_inspect_name(log.name):
            raise serializers.ValidationError(f"{log.name} is not an Inspect log: its name ends in .json or .eval")
        return log


@extend_schema(
    request={"multipart/form-data": InspectUploadSerializer},
    responses={201: RunSerializer(many=True), **errors(403, 429)},
)
@api_view(["POST"])
@permission_classes([permissions.IsAuthenticated])
@throttle_classes([LogUploadThrottle])
@parser_classes([MultiPartParser])
def inspect_import_api(request):
    """Import runs made elsewhere from an Inspect AI eval log (as `import_log` does): a self-reported run per
    sample, its steps the sample's model calls and tool calls, not scored here (an Inspect log holds no workspace
    files; the score the log reports is kept in the run's reason for having none). Every sample is checked before
    anything is written: a bad log is a 400 naming the problem, and nothing is written."""
    runs = _uploaded(request, InspectUploadSerializer, inspect_upload)
    return Response(RunSerializer(runs, many=True).data, status=status.HTTP_201_CREATED)


@extend_schema(responses={(200, "application/json"): dict, **errors(404)})
@api_view(["GET"])
def run_inspect_log_api(request, pk: int):
    """The run as an Inspect AI eval log (the JSON `inspect view` opens and `inspect_ai.log.read_eval_log` reads):
    one sample, its messages and events the run's steps and model calls, its score the final score with the
    baseline and improvement in the score's metadata. A run you may not see is a 404."""
    run = runs_visible_to(request.user).filter(pk=pk).first()
    if run is None:
        raise Http404(f"no run {pk}")
    return inspect_log_response(Run.objects.filter(pk=run.pk), name=inspect_log_name(run=run))


@extend_schema(responses={(200, "application/json"): dict, **errors(404)})
@api_view(["GET"])
def batch_inspect_log_api(request, pk: int):
    """The runs of a batch (a submission) you may see as one Inspect AI eval log, one sample per run."""
    runs = runs_visible_to(request.user).filter(batch_id=pk)
    if not runs.exists():
        raise Http404(f"no runs in batch {pk}")
    return inspect_log_response(runs, name=inspect_log_name(batch=pk), batch=pk)
