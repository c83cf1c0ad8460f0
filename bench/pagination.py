"""The API's pagination: ?limit= and ?offset= within bounds, anything else refused with a 400 that says what is
expected (DRF's own falls back silently on a bad number and hands a huge one to the database, which fails)."""

from __future__ import annotations

import re

from django.http import QueryDict
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

MAX_LIMIT = 500
MAX_OFFSET = 1_000_000_000  # far past any list here, far below PostgreSQL's bigint


def query_int(params: QueryDict, name: str, *, minimum: int, maximum: int, default: int) -> int:
    """The whole number in query parameter ``name`` (``default`` when absent); a 400 naming the parameter and
    the expected range when it is not a whole number within ``minimum..maximum``."""
    if name not in params:
        return default
    text = params[name]
    if not re.fullmatch(r"[0-9]{1,18}", text) or not minimum <= int(text) <= maximum:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise ValidationError({name: [f"expected a whole number from {minimum} to {maximum}, got {shown!r}"]})
    return int(text)


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT

    def get_limit(self, request) -> int:
        return query_int(
            request.query_params, self.limit_query_param, minimum=1, maximum=self.max_limit, default=self.default_limit
        )

    def get_offset(self, request) -> int:
        return query_int(request.query_params, self.offset_query_param, minimum=0, maximum=MAX_OFFSET, default=0)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        limit, offset = super().get_schema_operation_parameters(view)
        limit["schema"].update(minimum=1, maximum=self.max_limit, default=self.default_limit)
        offset["schema"].update(minimum=0, maximum=MAX_OFFSET, default=0)
        return [limit, offset]
