"""Error answers for URLs no view matched: JSON under /api/, the site's page elsewhere."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 404 page: what a view said was missing ("no task x"); a URL no view matched says nothing more (Django's
    own page would name its exception class, Resolver404)."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    said = exception.args[0] if exception.args and isinstance(exception.args[0], str) else ""
    return render(request, "404.html", {"request_path": request.path, "exception": said}, status=404)
