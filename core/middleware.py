"""Requests refused at the edge, before any view: a NUL byte in the path or the query string. No value here may
hold one, and PostgreSQL refuses it in a query (a 500 if it got that far); the API answers a JSON 400, a page a
400 page."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

NUL_MESSAGE = "the request's path or query string holds a NUL byte (%00); no path segment or parameter may contain one"


def has_nul_byte(request: HttpRequest) -> bool:
    return "\x00" in request.path or any("\x00" in key or "\x00" in value for key, value in request.GET.items())


class RejectNulBytesMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if has_nul_byte(request):
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": NUL_MESSAGE}, status=400)
            return render(request, "400.html", {"message": NUL_MESSAGE}, status=400)
        return self.get_response(request)
