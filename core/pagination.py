"""The API's pagination: ?limit= and ?offset= within bounds, anything else refused with a 400 that says what is
expected (DRF's own falls back silently on a bad number and hands a huge one to the database, which fails)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from django.http import QueryDict
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

MAX_LIMIT = 500
MAX_OFFSET = 1_000_000_000  # far past any list here, far below PostgreSQL's bigint


SHOWN = 40  # characters of a wrong value quoted back in an error


def shown(value: object) -> str:
    """A wrong value as an error quotes it: its repr, cut after SHOWN characters."""
    text = str(value)
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "...")


def whole_number(params: Mapping[str, str], name: str, *, minimum: int, maximum: int, default: int | None):
    """The whole number in query parameter ``name`` (``default`` when absent), or ``ValueError`` naming the range
    when it is not a whole number within ``minimum..maximum``: the one integer parser of query strings, the
    pages' and the API's (``runner.filters`` builds on it)."""
    if name not in params:
        return default
    text = params[name]
    digits = text.removeprefix("-") if minimum < 0 else text
    if not re.fullmatch(r"[0-9]{1,19}", digits) or not minimum <= int(text) <= maximum:
        raise ValueError(f"expected a whole number from {minimum} to {maximum}, got {shown(text)}")
    return int(text)


def query_int(params: QueryDict, name: str, *, minimum: int, maximum: int, default: int) -> int:
    """``whole_number``, or a 400 naming the parameter and the expected range."""
    try:
        return whole_number(params, name, minimum=minimum, maximum=maximum, default=default)
    except ValueError as exc:
        raise ValidationError({name: [str(exc)]}) from None


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


MAX_ID = 2**63 - 1  # PostgreSQL's bigint


class BeforeOrOffsetPagination(BoundedLimitOffsetPagination):
    """?limit= and ?offset= as above, or ?before=ID (with an ?offset=, skipped from there): the items that come after
    item ID in the list's order, as a keyset page (read from the list's index at any depth; nothing counted:
    ``count`` is null) whose ``next`` link goes on from its last item. A list view offers it with
    ``keyset_page(queryset, *, before, size, skip) -> (items, next_before)``, which raises ValidationError when it
    cannot list from item ``before``."""

    before_query_param = "before"

    def paginate_queryset(self, queryset, request, view=None):
        self.before = None
        keyset_page = getattr(view, "keyset_page", None)
        if keyset_page is None or getattr(view, "action", "list") != "list" or "before" not in request.query_params:
            return super().paginate_queryset(queryset, request, view)
        self.request = request
        self.limit = self.get_limit(request)
        skip = self.get_offset(request)  # with ?before=, from that item on (the schema allows both)
        self.before = query_int(request.query_params, "before", minimum=1, maximum=MAX_ID, default=1)
        items, self.next_before = keyset_page(queryset, before=self.before, size=self.limit, skip=skip)
        return items

    def get_paginated_response(self, data):
        if self.before is None:
            return super().get_paginated_response(data)
        url = replace_query_param(self.request.build_absolute_uri(), self.limit_query_param, self.limit)
        url = remove_query_param(url, self.offset_query_param)  # skipped once, from the first page's item
        following = replace_query_param(url, "before", self.next_before) if self.next_before else None
        return Response({"count": None, "next": following, "previous": None, "results": data})

    def get_paginated_response_schema(self, schema: dict) -> dict:
        answer = super().get_paginated_response_schema(schema)
        answer["properties"]["count"].update(
            nullable=True, description="How many items the list holds; null on a ?before= page (not counted)."
        )
        return answer

    def get_schema_operation_parameters(self, view) -> list[dict]:
        before = {
            "name": self.before_query_param,
            "required": False,
            "in": "query",
            "description": "List the items after the one with this id, in the list's order, read from the list's "
            "index at any depth; with ?offset=, that many of them are skipped first.",
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_ID},
        }
        return [*super().get_schema_operation_parameters(view), before]
