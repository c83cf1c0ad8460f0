"""What a reader asks of a list in its query string, parsed once, for the page, its exports and the API alike.

A list's parameters are a form (``QueryFilters``): its fields say what each parameter accepts, ``parse`` reads a
query string into values and, by parameter, what was wrong, and ``openapi_parameters`` turns the same fields into
the API schema's parameters, so the schema says exactly what the server accepts. A page shows the rest of a query
whose one parameter is wrong and says which; the API answers 400 naming it.

``RunFilters`` is the runs list's (the runs page and ``/api/v1/runs/``); the leaderboard's is
``leaderboard.query.BoardFilters``. Both say ``?versions=current|all`` for which task versions count.
"""

from __future__ import annotations

from collections.abc import Mapping

from django import forms
from drf_spectacular.utils import OpenApiParameter

from core.pagination import MAX_ID, shown, whole_number
from task_bank.package import CATEGORIES

from .models import ReviewTag, Run
from .selectors import ORIGINS, RANKINGS


class Choice(forms.ChoiceField):
    """One of ``values``; a wrong value is named with the choices."""

    def __init__(self, values, *, help_text: str = "", default: str | None = None, expected: str = "") -> None:
        self.values = list(values)
        self.default = default
        self.expected = expected or f"one of {', '.join(self.values)}"
        super().__init__(choices=[(v, v) for v in self.values], required=False, help_text=help_text)

    def validate(self, value) -> None:
        if value not in self.values:
            raise forms.ValidationError(f"expected {self.expected}, got {shown(value)}")

    def clean(self, value):
        return self.default if value is None else super().clean(value)

    def schema(self) -> dict:
        answer: dict = {"type": "string", "enum": self.values}
        if self.default is not None:
            answer["default"] = self.default
        return answer


class Text(forms.CharField):
    """Free text of at most ``max_length`` characters; ``blank_is_value``: present and empty asks for something
    (``?model=``: the runs without a model), else an empty value is no filter."""

    def __init__(
        self, *, max_length: int, help_text: str = "", blank_is_value: bool = False, pattern: str = ""
    ) -> None:
        self.blank_is_value = blank_is_value
        self.pattern = pattern  # what the schema says a value looks like; the form's own check says why not
        super().__init__(required=False, max_length=max_length, strip=False, help_text=help_text)

    def clean(self, value):
        if value is None:
            return None
        if len(value) > self.max_length:
            raise forms.ValidationError(f"expected at most {self.max_length} characters, got {len(value)}")
        if not value and self.pattern and not self.blank_is_value:  # the schema's pattern wants a value
            raise forms.ValidationError("expected a value, got an empty one (leave the parameter out instead)")
        return value if value or self.blank_is_value else None

    def schema(self) -> dict:
        # No NUL byte in any value: it is refused on every request (core.middleware.RejectNulBytesMiddleware).
        return {"type": "string", "maxLength": self.max_length, "pattern": self.pattern or r"^[^\x00]*$"}


class WholeNumber(forms.Field):
    """A whole number within ``minimum..maximum`` (an id, by default)."""

    def __init__(self, *, minimum: int = 1, maximum: int = MAX_ID, help_text: str = "") -> None:
        self.minimum, self.maximum = minimum, maximum
        super().__init__(required=False, help_text=help_text)

    def clean(self, value):
        if value is None:
            return None
        try:
            return whole_number({"n": value}, "n", minimum=self.minimum, maximum=self.maximum, default=None)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def schema(self) -> dict:
        return {"type": "integer", "minimum": self.minimum, "maximum": self.maximum}


class QueryFilters(forms.Form):
    """A list's query parameters (the fields: ``Choice``, ``Text``, ``WholeNumber``)."""

    @classmethod
    def parse(cls, params: Mapping[str, str], *, blank_is_absent: bool = False) -> tuple[dict, dict[str, str]]:
        """The values asked for (a field's default where absent or wrong) and, by parameter, what was wrong.
        ``blank_is_absent``: a page's filter form sends ``?status=`` for "any", so an empty value is no filter
        there (except where a field says an empty value asks for something); the API refuses it."""
        values: dict = {}
        errors: dict[str, str] = {}
        for name, field in cls.base_fields.items():
            raw = params.get(name)
            if raw == "" and blank_is_absent and not getattr(field, "blank_is_value", False):
                raw = None
            try:
                values[name] = field.clean(raw)
            except forms.ValidationError as exc:
                errors[name] = exc.messages[0]
                values[name] = field.clean(None)
        return values, errors

    @classmethod
    def openapi_parameters(cls) -> list[OpenApiParameter]:
        """The fields as the API schema's query parameters."""
        return [
            OpenApiParameter(name, field.schema(), OpenApiParameter.QUERY, description=str(field.help_text))
            for name, field in cls.base_fields.items()
        ]


#: ``?versions=``: only the runs of each task's current version, or every version's.
VERSIONS = ["current", "all"]


class RunFilters(QueryFilters):
    """The runs list's filters: the runs page and ``/api/v1/runs/`` (``selectors.runs_list`` applies them)."""

    status = Choice(Run.Status.values, help_text="only runs in this status")
    task = Text(max_length=100, help_text="only runs of the task with this slug")
    agent = Text(max_length=100, help_text="only runs of the agent with this name")
    version = Text(max_length=40, help_text="only runs of this version of the agent")
    model = Text(
        max_length=200, blank_is_value=True, help_text="only runs on this model; present and empty: runs without one"
    )
    ranking = Choice(
        list(RANKINGS),
        help_text="counted: the runs a leaderboard count stands for; infrastructure: the failures it shows apart; "
        "with-infrastructure: both",
    )
    versions = Choice(VERSIONS, default="all", help_text="current: only runs of their task's current version")
    category = Choice(CATEGORIES, help_text="only runs of tasks of this category")
    origin = Choice(list(ORIGINS), help_text="executed here (verified) or imported from a log (self-reported)")
    tag = Choice(ReviewTag.Kind.values, help_text="only runs that have, or have a step with, this review tag")
    batch = WholeNumber(help_text="only the runs of this batch (a submission's id)")

    @classmethod
    def parse(cls, params: Mapping[str, str], *, blank_is_absent: bool = False) -> tuple[dict, dict[str, str]]:
        if params.get("current") == "1" and "versions" not in params:  # links made before ?versions=
            params = (
                {**params.dict(), "versions": "current"}
                if hasattr(params, "dict")
                else {**params, "versions": "current"}
            )
        return super().parse(params, blank_is_absent=blank_is_absent)

    @staticmethod
    def selector_arguments(values: dict) -> dict:
        """``values`` as ``selectors.runs_list`` takes them."""
        arguments = {name: value for name, value in values.items() if name != "versions"}
        arguments["current"] = values["versions"] == "current"
        return arguments
