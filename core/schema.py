"""The OpenAPI schema's shared parts: the error answers operations declare, and the schema class (no pagination
on a POST: it answers a plain list, not a page)."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import permissions, serializers

DETAIL = inline_serializer("ErrorDetail", {"detail": serializers.CharField()})

ERRORS = {
    400: OpenApiResponse(
        OpenApiTypes.OBJECT,
        description="Bad input: the body names what was wrong and what is expected, under the parameter's or "
        "field's name (or `detail`, e.g. for a NUL byte in the path or query string, refused on every operation).",
    ),
    403: OpenApiResponse(
        DETAIL,
        description="Starting or cancelling runs and approving or rejecting submissions need a staff account; "
        "importing a run's log, uploading an agent or asking for runs of one, a signed-in one (and an agent of "
        "one's own).",
    ),
    404: OpenApiResponse(DETAIL, description="No such object, or one you may not see."),
    409: OpenApiResponse(
        DETAIL, description="The run has ended (nothing to cancel), or the submission was decided already."
    ),
    429: OpenApiResponse(DETAIL, description="Too many uploads or requests for runs: the body says when to try again."),
    503: OpenApiResponse(
        inline_serializer(
            "QueueUnreachable",
            {"detail": serializers.CharField(), "runs": serializers.ListField(child=serializers.IntegerField())},
        ),
        description="The job queue is unreachable. The runs are written and stay queued; they are sent when the "
        "queue is back. Do not send the request again.",
    ),
}


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    """The error answers with these status codes, to merge into an operation's ``responses``; 400 always (every
    operation refuses a NUL byte in its path or query string)."""
    return {code: ERRORS[code] for code in sorted({400, *codes})}


class BenchAutoSchema(AutoSchema):
    def _get_paginator(self):
        return super()._get_paginator() if self.method == "GET" else None

    def get_auth(self) -> list[dict]:
        """As drf-spectacular finds it, plus: reads are open to anyone where a permission class says so with
        ``reads_are_open = True`` (drf-spectacular knows only DRF's own permission classes)."""
        auths = super().get_auth()
        open_reads = any(getattr(p, "reads_are_open", False) for p in self.view.get_permissions())
        if open_reads and self.method in permissions.SAFE_METHODS and {} not in auths:
            auths.append({})
        return auths


def request_line_limit(result: dict, generator, request, public) -> dict:
    """A drf-spectacular postprocessing hook: every operation may answer 414, from the web server before the
    application sees the request, when the request line (the path and the query string) is longer than it takes
    (gunicorn.conf.py: 8,190 bytes)."""
    for path in result.get("paths", {}).values():
        for operation in path.values():
            if isinstance(operation, dict) and "responses" in operation:
                too_long = "The request line (path and query string) is longer than the server's 8,190 bytes."
                operation["responses"].setdefault("414", {"description": too_long})
    return result
